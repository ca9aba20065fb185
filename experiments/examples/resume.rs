//! Exact resume: a run stopped after its first checkpoint and continued with `Run::resume`
//! writes the same metrics as the same run never stopped (wall-clock fields aside).
//!
//!     cargo run --release --example resume -- [RUNS_DIR] [ONLINE_STEPS]
use anyhow::{bail, Result};
use o2o_experiments::Run;
use std::path::Path;

/// SAC on InvertedPendulum-v5, a checkpoint every 500 steps (at the next episode end).
fn sac<'a>(runs_dir: &str, steps: u64) -> Result<Run<'a>> {
    Ok(Run::preset("sac-inverted-pendulum")?
        .set([
            "train.random_steps=300".to_string(),
            format!("train.online_steps={steps}"),
            "checkpoint.every=500".into(),
            "eval.every=500".into(),
            "eval.episodes=3".into(),
        ])?
        .runs_dir(runs_dir)
        .device(tch::Device::Cpu))
}

/// `metrics.jsonl` without what depends on the clock (`wall_s`, `perf/*`).
fn metrics(dir: &Path) -> Result<Vec<serde_json::Value>> {
    let text = std::fs::read_to_string(dir.join("metrics.jsonl"))?;
    text.lines()
        .map(|line| {
            let mut v: serde_json::Map<String, serde_json::Value> = serde_json::from_str(line)?;
            v.retain(|k, _| k != "wall_s" && !k.starts_with("perf/"));
            Ok(serde_json::Value::Object(v))
        })
        .collect()
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let runs_dir = args.next().unwrap_or_else(|| "runs".into());
    let steps: u64 = args.next().map_or(Ok(2000), |s| s.parse())?;
    let whole = sac(&runs_dir, steps)?.run()?;

    // The same run, stopped by its first checkpoint (a callback's error ends a run, as a kill
    // would), then continued from that checkpoint.
    let mut dir = None;
    let stopped = sac(&runs_dir, steps)?
        .on_checkpoint(|ckpt, state| {
            dir = ckpt.parent().and_then(Path::parent).map(Path::to_path_buf);
            bail!("stopping at {} (step {})", ckpt.display(), state.step)
        })
        .run();
    let message = stopped.expect_err("the callback stops the run").to_string();
    let dir = dir.expect("the run checkpointed");
    println!("{message}; resuming {}", dir.display());
    let resumed = Run::resume(&dir)?.device(tch::Device::Cpu).run()?;

    let (a, b) = (metrics(&whole.dir)?, metrics(&resumed.dir)?);
    if a != b {
        bail!("the resumed run differs: {} records against {} uninterrupted", b.len(), a.len());
    }
    println!(
        "identical: {} metric records, final return {:?}",
        a.len(),
        resumed.summary.final_eval.map(|e| e.mean_return)
    );
    Ok(())
}
