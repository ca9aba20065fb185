//! Reading finished (or running) run directories for `o2o report`: which preset, task and seed
//! each run is, and its score curve from `metrics.jsonl`.

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Keys tried, in order, for each identifying field (dotted paths into `config.toml`, then
/// `manifest.json`). The first one present wins.
const PRESET_KEYS: &[&str] = &["preset", "algo"];
/// A dataset id (`hopper-medium-v2`) names the task more precisely than the env (`hopper-v2`).
const TASK_KEYS: &[&str] = &["task", "dataset.id", "env", "env_id", "env.id", "run.env"];
const SEED_KEYS: &[&str] = &["seed", "seeds.run"];

/// One run directory, reduced to what a report needs.
#[derive(Debug, Clone)]
pub struct Run {
    /// The run directory.
    pub dir: PathBuf,
    /// Its preset.
    pub preset: String,
    /// Its task (dataset id or env).
    pub task: String,
    /// Its seed, when recorded.
    pub seed: Option<i64>,
    /// `(x, score)` for every line of `metrics.jsonl` carrying a finite score.
    pub curve: Vec<(f64, f64)>,
    /// What makes runs comparable: algorithm, env, dataset (and its sha256), budget.
    pub group: String,
    /// `finished`, `running` (a live process holds its lock) or `stopped` (killed or failed).
    pub status: String,
    /// Its config flattened to `key = value`, without what differs by design between seeds of
    /// one experiment (`seed`, `preset`, `parent.*`, the dataset's path).
    pub settings: BTreeMap<String, String>,
    /// Trained by `o2o fleet learner` (see [`trained_by_fleet`]); its group says so.
    pub fleet: bool,
}

impl Run {
    /// The last logged score.
    pub fn final_score(&self) -> Option<f64> {
        self.curve.last().map(|p| p.1)
    }
    /// The highest logged score.
    pub fn best_score(&self) -> Option<f64> {
        self.curve.iter().map(|p| p.1).reduce(f64::max)
    }
}

/// `key = value` for every leaf of a JSON value (dotted keys).
fn flatten(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&key, v, out);
            }
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

/// Whether a process named in a run's `.lock` is alive (the run is being trained now).
fn locked_by_live_process(dir: &Path) -> bool {
    let text = std::fs::read_to_string(dir.join(crate::run::rundir::LOCK)).unwrap_or_default();
    let pid = text.strip_prefix("pid ").and_then(|r| r.split_whitespace().next()).and_then(|p| p.parse::<i32>().ok());
    pid.is_some_and(crate::run::rundir::process_alive)
}

/// Look up a dotted key in a JSON value.
fn lookup<'a>(v: &'a serde_json::Value, dotted: &str) -> Option<&'a serde_json::Value> {
    dotted.split('.').try_fold(v, |v, k| v.get(k))
}

fn as_label(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The first of `keys`, in any of `docs` (in order), whose value `convert` accepts.
fn find<T>(docs: &[serde_json::Value], keys: &[&str], convert: impl Fn(&serde_json::Value) -> Option<T>) -> Option<T> {
    docs.iter().find_map(|d| keys.iter().find_map(|k| lookup(d, k).and_then(&convert)))
}

/// Whether `o2o fleet learner` trained the run in `dir`: its manifest (in `docs`) names that
/// trainer, or, for a run written before manifests did, it holds the learner's `fleet.json`
/// (written at the end, and into every checkpoint). The config of such a run is the same as a
/// single-process run's: only this tells them apart.
fn trained_by_fleet(dir: &Path, docs: &[serde_json::Value]) -> bool {
    use crate::fleet::learner::FLEET_STATE;
    if find(docs, &["trainer"], as_label).is_some_and(|t| t == crate::run::rundir::FLEET_LEARNER) {
        return true;
    }
    let in_checkpoint = std::fs::read_dir(dir.join(crate::run::rundir::CHECKPOINTS))
        .map(|entries| entries.filter_map(|e| e.ok()).any(|e| e.path().join(FLEET_STATE).is_file()))
        .unwrap_or(false);
    dir.join(FLEET_STATE).is_file() || in_checkpoint
}

/// Read `dir`: `config.toml` and `manifest.json` (either may be missing), and `metrics.jsonl`,
/// taking `metric` as the score and `x_key` as the curve's x axis.
pub fn load_run(dir: &Path, metric: &str, x_key: &str) -> Result<Run> {
    if !dir.is_dir() {
        bail!("{} is not a run directory", dir.display());
    }
    let mut docs = Vec::new();
    let config = dir.join("config.toml");
    if config.exists() {
        let text = std::fs::read_to_string(&config).with_context(|| format!("cannot read {}", config.display()))?;
        let value: toml::Value =
            toml::from_str(&text).with_context(|| format!("{} is not valid TOML", config.display()))?;
        docs.push(serde_json::to_value(value).with_context(|| format!("cannot convert {}", config.display()))?);
    }
    let manifest = dir.join("manifest.json");
    if manifest.exists() {
        let text = std::fs::read_to_string(&manifest).with_context(|| format!("cannot read {}", manifest.display()))?;
        docs.push(serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", manifest.display()))?);
    }
    let label = |keys: &[&str], what: &str| -> String {
        find(&docs, keys, as_label).unwrap_or_else(|| {
            eprintln!(
                "o2o report: {} names no {what} (looked for {} in config.toml and manifest.json)",
                dir.display(),
                keys.join(", ")
            );
            "unknown".to_string()
        })
    };
    let preset = label(PRESET_KEYS, "preset");
    let task = label(TASK_KEYS, "task");
    let seed = find(&docs, SEED_KEYS, |v| v.as_i64());
    let metrics = dir.join("metrics.jsonl");
    let curve = read_curve(&metrics, metric, x_key)?;

    // Comparability: the algorithm, env, data (with its hash) and budget.
    let get = |k: &str| find(&docs, &[k], as_label);
    let algo = get("algo").unwrap_or_else(|| preset.clone());
    let env = get("env").unwrap_or_else(|| task.clone());
    let data = match (
        get("dataset.id").or_else(|| get("dataset.path").map(|p| p.rsplit('/').next().unwrap_or(&p).to_string())),
        docs.get(1).and_then(|m| lookup(m, "dataset.sha256")).and_then(as_label),
    ) {
        (Some(name), Some(sha)) => format!(" · {name} ({})", &sha[..sha.len().min(8)]),
        (Some(name), None) => format!(" · {name}"),
        // Data handed over in memory has no name: its content hash tells runs apart.
        (None, Some(sha)) => format!(" · in-memory data ({})", &sha[..sha.len().min(8)]),
        (None, None) => String::new(),
    };
    let steps = |k: &str| get(&format!("train.{k}")).unwrap_or_else(|| "0".into());
    let budget = format!(
        "offline {} · random {} · warm-up {} · online {}",
        steps("offline_steps"),
        steps("random_steps"),
        steps("warmup_steps"),
        steps("online_steps")
    );
    // A fleet learner's data come from asynchronous actors (policy lag, a rate-limited
    // update-to-data ratio): not seeds of the single-process experiment, so a group of its own.
    let fleet = trained_by_fleet(dir, &docs);
    let trainer = if fleet { format!(" · {}", crate::run::rundir::FLEET_LEARNER) } else { String::new() };
    let group = if docs.is_empty() {
        format!("{preset} · {task}{trainer}")
    } else {
        format!("{algo} · {env}{data} · {budget}{trainer}")
    };
    let finished = std::fs::read_to_string(dir.join("summary.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v.get("finished").and_then(|f| f.as_bool()))
        .unwrap_or(false);
    let status = if finished {
        "finished"
    } else if locked_by_live_process(dir) {
        "running"
    } else {
        "stopped"
    }
    .to_string();
    let mut settings = BTreeMap::new();
    if let Some(config) = docs.first().filter(|_| config.exists()) {
        flatten("", config, &mut settings);
    }
    settings.retain(|k, _| !(k == "seed" || k == "preset" || k.starts_with("parent.") || k == "dataset.path"));
    Ok(Run { dir: dir.to_path_buf(), preset, task, seed, curve, group, status, settings, fleet })
}

/// `(x, score)` pairs from a metrics file; lines without a finite score are skipped, and a
/// half-written last line (a run still writing) is ignored.
pub fn read_curve(path: &Path, metric: &str, x_key: &str) -> Result<Vec<(f64, f64)>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut curve = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let obj: serde_json::Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(_) if i + 1 == lines.len() && !text.ends_with('\n') => break,
            Err(e) => bail!("{} line {}: not a JSON object: {e}", path.display(), i + 1),
        };
        let Some(score) = obj.get(metric).and_then(|v| v.as_f64()).filter(|s| s.is_finite()) else { continue };
        let Some(x) = obj.get(x_key).and_then(|v| v.as_f64()) else {
            bail!("{} line {}: has {metric} but no {x_key}", path.display(), i + 1)
        };
        curve.push((x, score));
    }
    Ok(curve)
}

/// The last finite value of every key starting with `prefix` in a metrics file (e.g. the final
/// `eval/success/<level>/<task>` rates of an ImagineBench run); a missing file gives none.
pub fn last_values(path: &Path, prefix: &str) -> Result<BTreeMap<String, f64>> {
    let mut out = BTreeMap::new();
    let Ok(text) = std::fs::read_to_string(path) else { return Ok(out) };
    for line in text.lines().filter(|l| l.contains(prefix)) {
        // A half-written last line (a run still writing) is skipped.
        let Ok(serde_json::Value::Object(obj)) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        for (k, v) in obj.iter().filter(|(k, _)| k.starts_with(prefix)) {
            if let Some(v) = v.as_f64().filter(|v| v.is_finite()) {
                out.insert(k.clone(), v);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_identity_from_config_and_manifest_and_scores_from_metrics() {
        let d = tempfile::tempdir().unwrap();
        // The runner's config.toml: the dataset id names the task, not the env.
        std::fs::write(
            d.path().join("config.toml"),
            "preset = \"iql-hopper\"\nalgo = \"iql\"\nenv = \"hopper-v2\"\n[dataset]\nid = \"hopper-medium-v2\"\n",
        )
        .unwrap();
        std::fs::write(d.path().join("manifest.json"), r#"{"preset": "ignored", "seeds": {"run": 3, "agent": 9}}"#)
            .unwrap();
        std::fs::write(
            d.path().join("metrics.jsonl"),
            concat!(
                "{\"grad_step\":0,\"env_step\":0,\"wall_s\":0.1,\"train/critic_loss\":1.0}\n",
                "{\"grad_step\":10,\"env_step\":0,\"wall_s\":0.2,\"eval/normalized_score\":20.0}\n",
                "{\"grad_step\":20,\"env_step\":5,\"wall_s\":0.3,\"eval/normalized_score\":null}\n",
                "{\"grad_step\":30,\"env_step\":9,\"wall_s\":0.4,\"eval/normalized_score\":60.0}\n",
                "{\"grad_step\":40,\"env_step\":12,\"wall_s\":0.5,\"eval/normalized_score\":50.0}\n",
                "{\"grad_step\":50,\"env_st"
            ),
        )
        .unwrap();
        let run = load_run(d.path(), "eval/normalized_score", "grad_step").unwrap();
        assert_eq!((run.preset.as_str(), run.task.as_str(), run.seed), ("iql-hopper", "hopper-medium-v2", Some(3)));
        assert_eq!(run.curve, vec![(10.0, 20.0), (30.0, 60.0), (40.0, 50.0)]);
        assert_eq!((run.final_score(), run.best_score()), (Some(50.0), Some(60.0)));
    }

    #[test]
    fn a_broken_line_in_the_middle_names_the_file_and_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("metrics.jsonl");
        std::fs::write(&p, "{\"grad_step\":1}\nnot json\n{\"grad_step\":2}\n").unwrap();
        let err = read_curve(&p, "eval/return", "grad_step").unwrap_err().to_string();
        assert!(err.contains("metrics.jsonl line 2"), "{err}");
    }
}
