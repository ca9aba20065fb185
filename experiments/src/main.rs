//! `o2o`: offline-to-online reinforcement learning for robotics, from the command line.
//!
//! Each subcommand lives in its own module under `commands/`; the work is done by the
//! `o2o_experiments` library (the runner, run directories, sinks, reports, the benchmark
//! datasets' makers, the speed benchmarks and the multi-run studies). This file only parses the
//! command line, dispatches, and turns errors into a message and an exit code.

mod commands;

use clap::{Parser, Subcommand};

/// Offline-to-online continuous-control RL: pretrain on logged data, fine-tune online, watch in Rerun.
#[derive(Parser)]
#[command(
    name = "o2o",
    version,
    about = "Offline-to-online RL for robotics: pretrain on logged data, fine-tune online, watch in Rerun",
    long_about = None
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check the installation: libtorch, MuJoCo, HDF5, Rerun, Gymnasium assets.
    Doctor(commands::doctor::DoctorArgs),
    /// Benchmarks against references measured in the same run.
    Bench(commands::bench::BenchArgs),
    /// MuJoCo tasks: list them, check one against Gymnasium (`o2o env parity <ID>`).
    Env(commands::env::EnvArgs),
    /// Train a run from a preset: offline on a dataset, or online from scratch.
    Train(commands::run::TrainArgs),
    /// Run a preset end to end (WSRL: pretrain → warm-up → fine-tune), or from an offline run with --from.
    Run(commands::run::RunArgs),
    /// Fine-tune a finished run online, in a new run directory.
    Finetune(commands::run::FinetuneArgs),
    /// Multi-run experiments: `o2o experiment wsrl-ablation --task hopper-medium`.
    Experiment(commands::experiment::ExperimentArgs),
    /// Write a run's deterministic policy as TorchScript (runs in Python or Rust without o2o).
    Export(commands::export::ExportArgs),
    /// Evaluate a run's checkpoint: `o2o eval runs/<run> --episodes 20 --seed 7`.
    Eval(commands::eval::EvalArgs),
    /// Continue a killed run from its newest checkpoint.
    Resume(commands::run::ResumeArgs),
    /// Offline datasets: download, info, convert, make-benchmark, view.
    Dataset(commands::dataset::DatasetArgs),
    /// Scores over seeds: mean, IQM and 95% bootstrap CIs per preset and task, plus PNG curves.
    Report(o2o_experiments::report::ReportArgs),
    /// Progress reward models from demonstrations: record demos, train, evaluate, adapt.
    Reward(commands::reward::RewardArgs),
    /// Open a run's Rerun recording in the viewer (or print how to serve it to a remote browser).
    View(commands::view::ViewArgs),
    /// Many actors, one learner, across processes and machines on NATS JetStream.
    Fleet(commands::fleet::FleetArgs),
    /// Robots: `o2o robot check <config>`, `o2o robot run --config <config> --from <run>`, `o2o robot record`.
    Robot(commands::robot::RobotArgs),
}

fn main() {
    // `o2o env list | head -1`: a closed pipe ends the process quietly, as it does for other
    // command-line tools, instead of panicking in println!.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    if matches!(
        cli.command,
        Command::Train(_)
            | Command::Run(_)
            | Command::Finetune(_)
            | Command::Resume(_)
            | Command::Robot(_)
            | Command::Experiment(_)
    ) {
        // Ctrl-C and SIGTERM: a checkpoint at the next safe point, then the resume command.
        o2o_experiments::run::interrupt::install();
    }
    let result = match cli.command {
        Command::Doctor(args) => commands::doctor::run(args),
        Command::Bench(args) => commands::bench::run(args),
        Command::Env(args) => commands::env::run(args),
        Command::Train(args) => commands::run::train(args),
        Command::Run(args) => commands::run::run(args),
        Command::Finetune(args) => commands::run::finetune(args),
        Command::Resume(args) => commands::run::resume(args),
        Command::Eval(args) => commands::eval::run(args),
        Command::Export(args) => commands::export::run(args),
        Command::Experiment(args) => commands::experiment::run(args),
        Command::Dataset(args) => commands::dataset::run(args),
        Command::Report(args) => o2o_experiments::report::run(args),
        Command::View(args) => commands::view::run(args),
        Command::Fleet(args) => commands::fleet::run(args),
        Command::Reward(args) => commands::reward::run(args),
        Command::Robot(args) => commands::robot::run(args),
    };
    if let Err(err) = result {
        // A closed pipe (`o2o ... | head`) is not an error worth reporting.
        if err
            .chain()
            .any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe))
        {
            std::process::exit(0);
        }
        if let Some(stop) = o2o_experiments::errors::interrupted(&err) {
            eprintln!(
                "o2o: stopped at step {} with a checkpoint ({}); continue with:",
                stop.step,
                stop.checkpoint.display()
            );
            eprintln!("  o2o resume {}", stop.dir.display());
            if std::env::args().any(|a| a == "--json") {
                // The machine-readable line a sweep (or a script) reads in place of a summary.
                let line = serde_json::json!({
                    "stopped": true,
                    "run_dir": stop.dir,
                    "checkpoint": stop.checkpoint,
                    "step": stop.step,
                });
                println!("{line}");
            }
            std::process::exit(130);
        }
        if let Some(stop) = err.downcast_ref::<commands::run::sweep::SweepStopped>() {
            eprintln!("o2o: {stop}");
            std::process::exit(130);
        }
        if let Some(stop) = err.downcast_ref::<o2o_experiments::studies::jobs::StudyStopped>() {
            eprintln!("o2o: {stop}");
            std::process::exit(130);
        }
        // libtorch's C++ backtraces stay out of what users read.
        use o2o_experiments::errors::without_cpp_frames;
        eprintln!("error: {}", without_cpp_frames(&err.to_string()));
        for cause in err.chain().skip(1) {
            eprintln!("  caused by: {}", without_cpp_frames(&cause.to_string()));
        }
        std::process::exit(2);
    }
}
