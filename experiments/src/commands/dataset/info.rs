//! `o2o dataset info <id|path>`: keys, dtypes and shapes, episodes, return statistics, the
//! D4RL-normalized score of the dataset's episodes, and validation warnings. Works on D4RL-format
//! files, Minari dataset folders, LeRobotDataset folders and o2o ImagineBench files.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use o2o_datasets::d4rl::D4rlDataset;
use o2o_datasets::h5util::{self, Dtype};
use o2o_datasets::imaginebench::ImagineBenchDataset;
use o2o_datasets::minari::MinariDataset;
use o2o_datasets::registry::{self, RegistryEntry};
use o2o_datasets::scores;
use o2o_envs::Env;

/// Arguments of `o2o dataset info`.
#[derive(Args, Debug)]
pub struct InfoArgs {
    /// A registry id (read from the cache), a D4RL-format .hdf5 file, a Minari dataset folder, a
    /// LeRobotDataset folder (v3.0 or v2.1), or an o2o ImagineBench .hdf5 file.
    pub dataset: String,
    /// Registry id whose env (obs/act sizes, time limit, score family) to check the data against
    /// (default: recognised from the id or the file name).
    #[arg(long)]
    pub env: Option<String>,
    /// Cache folder for ids (default `$O2O_DATASETS`, else `$HOME/.cache/o2o/datasets`).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    #[command(flatten)]
    pub lerobot: super::LeRobotKeyArgs,
}

/// Resolves `<id|path>` to a path and, when known, its registry entry.
pub fn resolve(dataset: &str, env: Option<&str>, cache_dir: Option<&Path>) -> Result<(PathBuf, Option<RegistryEntry>)> {
    let pinned = env.map(registry::lookup).transpose()?;
    let p = Path::new(dataset);
    if p.exists() {
        let by_name = p.file_name().and_then(|n| registry::lookup_file(&n.to_string_lossy()));
        return Ok((p.to_path_buf(), pinned.or(by_name)));
    }
    let e = registry::lookup(dataset)
        .with_context(|| format!("`{dataset}` is neither an existing file or folder nor a known dataset id"))?;
    let (path, found) = o2o_datasets::download::cached_file(cache_dir, e.file_name());
    if !found {
        bail!("{dataset} is not downloaded ({} is missing); run `o2o dataset download {dataset}`", path.display());
    }
    Ok((path, Some(pinned.unwrap_or(e))))
}

/// `o2o dataset info`.
pub fn run(args: InfoArgs) -> Result<()> {
    let (path, entry) = resolve(&args.dataset, args.env.as_deref(), args.cache_dir.as_deref())?;
    let mut warnings = Vec::new();
    let (d4rl, ref_scores) = if o2o_datasets::lerobot::is_lerobot_dir(&path) {
        let l = o2o_datasets::lerobot::LeRobotDataset::read(&path, &args.lerobot.keys())
            .with_context(|| format!("reading the LeRobot dataset {}", path.display()))?;
        print_lerobot(&l);
        warnings.extend(l.warnings.iter().cloned());
        (l.d4rl, None)
    } else if path.is_dir() {
        let m = MinariDataset::read(&path).with_context(|| format!("reading Minari dataset {}", path.display()))?;
        println!("format: Minari ({}), {} episodes, {} steps", m.source.display(), m.episodes.len(), m.total_steps());
        println!("dataset_id: {}", m.metadata.get("dataset_id").and_then(|v| v.as_str()).unwrap_or("?"));
        if let Some(e) = m.episodes.first() {
            println!("keys of episode_0: observations ({}, {}) {}, actions ({}, {}) {}, rewards ({},) {}, terminations, truncations (bool)",
                e.len() + 1, m.obs_dim, m.dtypes["observations"], e.len(), m.act_dim, m.dtypes["actions"], e.len(), m.dtypes["rewards"]);
        }
        let refs = match (
            m.metadata.get("ref_min_score").and_then(|v| v.as_f64()),
            m.metadata.get("ref_max_score").and_then(|v| v.as_f64()),
        ) {
            (Some(lo), Some(hi)) if hi > lo => Some((lo, hi)),
            _ => None,
        };
        (m.to_d4rl(), refs)
    } else {
        let file = h5util::open(&path)?;
        let keys = h5util::walk_datasets(&path, &file)?;
        let ib = keys.iter().any(|k| k == "instructions/text");
        println!("format: {} ({})", if ib { "o2o ImagineBench" } else { "D4RL" }, path.display());
        println!("keys:");
        for k in &keys {
            let ds = file.dataset(k).map_err(|e| h5util::h5err(&path, k, e))?;
            let dt = h5util::dtype_of(&path, k, &ds)?;
            if k.starts_with("metadata/") && dt == Dtype::Str {
                let s = h5util::read_string(&path, &file, k).unwrap_or_default();
                println!("  {k:<40} {dt:<8} {:?}", s.chars().take(40).collect::<String>());
            } else {
                println!("  {k:<40} {dt:<8} {:?}", ds.shape());
            }
        }
        drop(file);
        // A file made by `o2o dataset make-benchmark`: its manifest says how.
        for line in o2o_experiments::benchmarks::manifest::describe(&path)?.unwrap_or_default() {
            println!("{line}");
        }
        if ib {
            let d = ImagineBenchDataset::read(&path)?;
            println!(
                "transitions: {} ({} real, {} imaginary), {} instructions, embedding size {}",
                d.len(),
                d.len() - d.n_imaginary(),
                d.n_imaginary(),
                d.instructions.len(),
                d.embed_dim
            );
            let t = d.transitions(o2o_datasets::imaginebench::Rows::All, false, None)?;
            let returns: Vec<f64> = split_returns(&t.rewards, &t.episode_ends);
            print_returns(&returns, None);
            return Ok(());
        }
        (D4rlDataset::read(&path)?, None)
    };
    if let Some(e) = &entry {
        println!(
            "registry: {} (env {}, obs {}, act {}, time limit {}, score family {})",
            e.id, e.env_id, e.obs_dim, e.act_dim, e.max_episode_steps, e.family
        );
        if let Err(err) = d4rl.check_env(&e.env_id, e.obs_dim, e.act_dim) {
            warnings.push(format!("does not fit the env: {err}"));
        } else if let Ok(env) = o2o_envs::make(&e.env_id) {
            let space = env.action_space();
            warnings.extend(d4rl.action_range_warnings(&space.low, &space.high));
        }
    }
    let max_steps = entry.as_ref().map(|e| e.max_episode_steps).filter(|_| d4rl.timeouts.is_none());
    let eps = d4rl.episodes(max_steps);
    let term = eps.iter().filter(|e| e.terminated).count();
    let trunc = eps.iter().filter(|e| e.truncated).count();
    println!("rows: {}, obs {}, act {}", d4rl.len(), d4rl.obs_dim, d4rl.act_dim);
    println!("episodes: {} ({term} terminated, {trunc} truncated, {} unflagged)", eps.len(), eps.len() - term - trunc);
    let lens: Vec<usize> = eps.iter().map(|e| e.rows.len()).collect();
    if !lens.is_empty() {
        println!(
            "episode length: min {}, mean {:.1}, max {}",
            lens.iter().min().unwrap_or(&0),
            lens.iter().sum::<usize>() as f64 / lens.len() as f64,
            lens.iter().max().unwrap_or(&0)
        );
    }
    let returns = d4rl.episode_returns(max_steps);
    let refs = ref_scores.or_else(|| entry.as_ref().and_then(|e| scores::ref_scores(e.family).ok()));
    print_returns(&returns, refs);
    warnings.extend(d4rl.warnings());
    if warnings.is_empty() {
        println!("warnings: none");
    } else {
        println!("warnings:");
        for w in warnings {
            println!("  - {w}");
        }
    }
    Ok(())
}

fn print_lerobot(l: &o2o_datasets::lerobot::LeRobotDataset) {
    let i = &l.info;
    println!(
        "format: LeRobotDataset {} ({}), {} episodes, {} frames, fps {}, robot_type {}",
        i.codebase_version,
        l.root.display(),
        l.episodes.len(),
        l.len(),
        i.fps,
        i.robot_type.as_deref().unwrap_or("none")
    );
    let shape = |k: &str| i.features.get(k).map(|f| format!("{} {:?}", f.dtype, f.shape)).unwrap_or_default();
    println!("features read:");
    for k in &l.observation_keys {
        println!("  {k:<40} {:<16} -> observations", shape(k));
    }
    println!("  {:<40} {:<16} -> actions", l.action_key, shape(&l.action_key));
    for (key, to) in
        [(&l.reward_key, "rewards"), (&l.done_key, "terminals"), (&l.intervention_key, "infos/intervention")]
    {
        match key {
            Some(k) => println!("  {k:<40} {:<16} -> {to}", shape(k)),
            None => println!("  {:<40} {:<16} -> {to}", "(none)", ""),
        }
    }
    println!("  an episode's last frame without the done flag -> timeouts");
    if !l.skipped.is_empty() {
        println!("not read (video and image streams are not decoded): {}", l.skipped.join(", "));
    }
    println!("data files: {}", l.data_files.len());
    println!("tasks: {:?}", l.tasks);
}

fn split_returns(rewards: &[f32], ends: &[f32]) -> Vec<f64> {
    let mut out = Vec::new();
    let mut acc = 0.0;
    for (i, r) in rewards.iter().enumerate() {
        acc += *r as f64;
        if ends[i] != 0.0 || i + 1 == rewards.len() {
            out.push(acc);
            acc = 0.0;
        }
    }
    out
}

fn print_returns(returns: &[f64], refs: Option<(f64, f64)>) {
    if returns.is_empty() {
        println!("returns: no episodes");
        return;
    }
    let min = returns.iter().copied().fold(f64::INFINITY, f64::min);
    let max = returns.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mean = returns.iter().sum::<f64>() / returns.len() as f64;
    println!("episode return: min {min:.3}, mean {mean:.3}, max {max:.3}");
    if let Some((lo, hi)) = refs {
        let n = |r: f64| 100.0 * (r - lo) / (hi - lo);
        println!("normalized score (D4RL, x100): min {:.1}, mean {:.1}, max {:.1}", n(min), n(mean), n(max));
    } else {
        println!("normalized score: unknown env (pass --env <registry id>)");
    }
}
