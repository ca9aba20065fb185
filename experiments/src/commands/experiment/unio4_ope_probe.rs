//! `o2o experiment unio4-ope-probe RUN_DIR...`: does AM-Q rank a finished Uni-O4 run's members
//! as their real returns do, and at which rollout horizon? Re-scores each run's BC and BPPO
//! members ([`o2o_experiments::run::unio4::ope_probe`]) and writes `probe.md` and `probe.json`.

use crate::commands::run::DeviceArg;
use anyhow::{Context, Result};
use clap::Args;
use o2o_experiments::run::unio4::{ope_probe, OpeProbe};
use std::fmt::Write as _;
use std::path::PathBuf;

/// Arguments of `o2o experiment unio4-ope-probe`.
#[derive(Args, Debug)]
pub struct ProbeArgs {
    /// Finished Uni-O4 run directories (their `unio4/` stage files are read).
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// Model rollout horizons H to score AM-Q at.
    #[arg(long, value_delimiter = ',', default_values_t = [100usize, 1000])]
    pub horizons: Vec<usize>,
    /// Dataset start states per rollout batch (shared by every policy and horizon).
    #[arg(long, default_value_t = 512)]
    pub start_states: usize,
    /// Real episodes per policy.
    #[arg(long, default_value_t = 20)]
    pub episodes: usize,
    /// Output folder for `probe.md` and `probe.json`.
    #[arg(long)]
    pub out: PathBuf,
    /// cpu, cuda, or auto.
    #[arg(long, value_enum, default_value = "auto")]
    pub device: DeviceArg,
    /// Torch threads (on the CPU the probe is one process; the default keeps it to one core).
    #[arg(long, default_value_t = 1)]
    pub threads: i32,
}

/// `o2o experiment unio4-ope-probe`.
pub fn run(args: ProbeArgs) -> Result<()> {
    let device = args.device.resolve()?;
    tch::set_num_threads(args.threads);
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    let mut probes = Vec::new();
    for (i, run) in args.runs.iter().enumerate() {
        eprintln!("[{}/{}] {}", i + 1, args.runs.len(), run.display());
        probes.push(ope_probe(run, &args.horizons, args.start_states, args.episodes, device)?);
    }
    let md = table(&probes, &super::command_line());
    write(&args.out.join("probe.json"), serde_json::to_string_pretty(&probes)?.as_bytes())?;
    write(&args.out.join("probe.md"), md.as_bytes())?;
    println!("{md}");
    println!("wrote {}/probe.md and probe.json", args.out.display());
    Ok(())
}

fn write(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    o2o_experiments::run::rundir::write_atomic(path, bytes)
}

/// The markdown report: per run, every policy's real return and AM-Q per horizon, then the rank
/// correlations per horizon with their mean over runs.
fn table(probes: &[OpeProbe], command: &str) -> String {
    let mut s = String::new();
    let Some(first) = probes.first() else { return s };
    let hs = &first.horizons;
    let _ = writeln!(s, "# AM-Q against real returns, per horizon\n");
    let _ = writeln!(
        s,
        "Command: `{command}`\n\nEach run's BC members and BPPO members (the ones the hand-over chose from), scored by \
         AM-Q with the run's critic and dynamics from one shared batch of {} dataset states and one model noise \
         stream, and by the real return over {} episodes (reset as the hand-over's evaluation). `len` is the mean \
         number of model steps a rollout lasted before the task's termination rule.\n",
        first.start_states, first.episodes
    );
    let _ = writeln!(s, "## Rank correlation (Spearman) of AM-Q with the real return\n");
    let head: Vec<String> = hs.iter().map(|h| format!("H = {h}")).collect();
    let _ = writeln!(s, "| run | policies | {} |", head.join(" | "));
    let _ = writeln!(s, "|---|---|{}", "---|".repeat(hs.len()));
    let fmt_row = |v: &[f64]| v.iter().map(|x| format!("{x:+.2}")).collect::<Vec<_>>().join(" | ");
    for p in probes {
        let name = p.run.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned());
        let _ = writeln!(s, "| {name} | BPPO members | {} |", fmt_row(&p.rank_corr_bppo));
        let _ = writeln!(s, "| {name} | BC + BPPO members | {} |", fmt_row(&p.rank_corr_all));
    }
    let mean = |f: &dyn Fn(&OpeProbe) -> &Vec<f64>| -> Vec<f64> {
        (0..hs.len())
            .map(|k| {
                let v: Vec<f64> = probes.iter().map(|p| f(p)[k]).filter(|x| x.is_finite()).collect();
                v.iter().sum::<f64>() / v.len().max(1) as f64
            })
            .collect()
    };
    let _ = writeln!(s, "| mean | BPPO members | {} |", fmt_row(&mean(&|p| &p.rank_corr_bppo)));
    let _ = writeln!(s, "| mean | BC + BPPO members | {} |\n", fmt_row(&mean(&|p| &p.rank_corr_all)));
    let _ = writeln!(s, "## Every policy\n");
    let cols: Vec<String> = hs.iter().map(|h| format!("AM-Q H={h} (len)")).collect();
    let _ = writeln!(s, "| run | policy | real return | real length | {} |", cols.join(" | "));
    let _ = writeln!(s, "|---|---|---|---|{}", "---|".repeat(hs.len()));
    for p in probes {
        let name = p.run.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned());
        for q in &p.policies {
            let am: Vec<String> = q.am_q.iter().zip(&q.model_length).map(|(a, l)| format!("{a:.2} ({l:.0})")).collect();
            let _ = writeln!(
                s,
                "| {name} | {} {} | {:.1} ± {:.1} | {:.0} | {} |",
                q.stage,
                q.member,
                q.real_return,
                q.real_return_std,
                q.real_length,
                am.join(" | ")
            );
        }
    }
    s
}
