//! `o2o dataset view <id|path> [--episodes N]`: log a dataset's first episodes to Rerun.
//!
//! Observations, actions and rewards become series on the `dataset_step` (row) and
//! `episode_step` timelines. When the env is known (a registry id, a cached file's name, or
//! `--env`) and the file carries `infos/qpos` and `infos/qvel` (D4RL gym-mujoco files do), each
//! row's state is set in the MuJoCo model and its bodies are drawn moving, as in a run's
//! evaluation episodes (entity layout in `logging/rerun_sink.rs`).

use anyhow::{bail, Context, Result};
use clap::Args;
use o2o_datasets::d4rl::D4rlDataset;
use o2o_datasets::registry;
use o2o_experiments::logging::layout::{camera_for, dataset_layout};
use o2o_experiments::logging::rerun_sink::RerunSink;
use o2o_experiments::logging::scene::{body_poses, model_geometry};
use o2o_experiments::logging::sinks::{open_stream, RerunArgs, RerunTarget};
use std::path::{Path, PathBuf};

/// Arguments of `o2o dataset view`.
#[derive(Args, Debug)]
pub struct ViewArgs {
    /// A registry id (`hopper-medium-v2`, read from the dataset cache), a D4RL-format HDF5 file,
    /// a Minari dataset folder or a LeRobotDataset folder (v3.0 or v2.1).
    pub dataset: String,
    /// How many episodes to log, from the start of the file.
    #[arg(long, default_value_t = 3)]
    pub episodes: usize,
    /// The env to replay the states in (default: the registry's env for the id or file name).
    #[arg(long)]
    pub env: Option<String>,
    /// The recording file with `--rerun save` (default: `<dataset>.rrd` in the current directory).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub rerun: RerunArgs,
    #[command(flatten)]
    pub lerobot: super::LeRobotKeyArgs,
}

/// The file to read and the env it belongs to (if known).
fn resolve(dataset: &str, env: Option<&str>) -> Result<(PathBuf, Option<String>)> {
    let as_path = Path::new(dataset);
    if as_path.exists() {
        let by_name = as_path.file_name().and_then(|n| registry::lookup_file(&n.to_string_lossy()));
        return Ok((as_path.to_path_buf(), env.map(str::to_string).or(by_name.map(|e| e.env_id))));
    }
    let entry =
        registry::lookup(dataset).with_context(|| format!("{dataset} is neither a file nor a known dataset id"))?;
    let path = o2o_datasets::download::default_cache_dir().join(entry.file_name());
    if !path.exists() {
        bail!("{dataset} is not downloaded ({} is missing); download it first", path.display());
    }
    Ok((path, Some(env.map(str::to_string).unwrap_or(entry.env_id))))
}

/// Rows of `infos/<key>` as f64, if the file has the column with `width` values per row.
fn info_rows(ds: &D4rlDataset, key: &str, width: usize) -> Result<Option<Vec<f64>>> {
    let Some(c) = ds.infos.get(key) else { return Ok(None) };
    if c.shape != [ds.len(), width] {
        bail!(
            "{}: {key} has shape {:?}, expected [{}, {width}] for the env's model",
            ds.source.display(),
            c.shape,
            ds.len()
        );
    }
    Ok(Some(c.data.iter().map(|&v| v as f64).collect()))
}

/// `o2o dataset view`.
pub fn run(args: ViewArgs) -> Result<()> {
    let (path, env_id) = resolve(&args.dataset, args.env.as_deref())?;
    let ds = super::read_rows(&path, &args.lerobot.keys())?;
    let stem = super::stem(&path);
    let out = args.out.clone().unwrap_or_else(|| PathBuf::from(format!("{stem}.rrd")));
    let target = args.rerun.target()?;
    if target == RerunTarget::Off {
        bail!("--rerun off: nothing to do");
    }
    // 3D replay needs the env's model and the recorded simulator states.
    let mut scene = None;
    let mut camera = None;
    if let Some(id) = &env_id {
        match o2o_envs::make_unwrapped(id) {
            Ok(mut env) => {
                let (nq, nv) = (env.qpos().len(), env.qvel().len());
                match (info_rows(&ds, "infos/qpos", nq)?, info_rows(&ds, "infos/qvel", nv)?) {
                    (Some(qpos), Some(qvel)) if !ds.is_empty() => {
                        // The camera frames the model in the file's first recorded state.
                        env.set_state(&qpos[..nq], &qvel[..nv])
                            .with_context(|| format!("{} row 0: setting the recorded state", path.display()))?;
                        camera = camera_for(&model_geometry(&env), &body_poses(&env));
                        scene = Some((env, qpos, qvel, nq, nv));
                    }
                    _ => eprintln!(
                        "o2o dataset view: {} has no infos/qpos and infos/qvel; logging series only",
                        path.display()
                    ),
                }
            }
            Err(e) => eprintln!("o2o dataset view: no 3D replay ({id}: {e})"),
        }
    }
    let layout = dataset_layout(camera, true);
    let stream = open_stream(&target, &out, &format!("dataset-{stem}"), &layout)?.context("no recording stream")?;
    let mut sink = RerunSink::new(stream, args.rerun.rerun_queue, target.flush_timeout())?;
    let mut log = sink.episode_logger().context("the Rerun sink has stopped")?.for_replay("dataset_step");
    if let Some((env, ..)) = &scene {
        log.set_geometry(model_geometry(env));
    }

    let episodes = ds.episodes(None);
    let mut steps = 0usize;
    for ep in episodes.iter().take(args.episodes) {
        let ret: f64 = ep.rows.clone().map(|i| ds.rewards[i] as f64).sum();
        log.begin_replayed_episode(ret, ep.rows.len());
        for i in ep.rows.clone() {
            let poses = match scene.as_mut() {
                Some((env, qpos, qvel, nq, nv)) => {
                    env.set_state(&qpos[i * *nq..(i + 1) * *nq], &qvel[i * *nv..(i + 1) * *nv])
                        .with_context(|| format!("{} row {i}: setting the recorded state", path.display()))?;
                    body_poses(env)
                }
                None => Vec::new(),
            };
            let action = &ds.actions[i * ds.act_dim..(i + 1) * ds.act_dim];
            log.step_with_obs(&poses, ds.obs(i), action, ds.rewards[i] as f64);
            steps += 1;
        }
    }
    drop(log);
    sink.finish();
    let shown = episodes.len().min(args.episodes);
    let replay = if scene.is_some() { " with 3D replay" } else { "" };
    println!("Logged {shown} of {} episodes ({steps} steps){replay} from {}", episodes.len(), path.display());
    if target == RerunTarget::Save {
        println!("Recording: {}  (open it with `o2o view {}`)", out.display(), out.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use o2o_datasets::h5util::{Column, Dtype};
    use o2o_envs::Env;
    use o2o_experiments::logging::inspect::{chunks, rrd};
    use std::collections::BTreeMap;

    /// A small D4RL-format Hopper file with two episodes and recorded states, made by stepping
    /// the real env with a fixed action.
    fn hopper_file(path: &Path) {
        let mut env = o2o_envs::make_unwrapped("hopper-v2").unwrap();
        let (mut obs, mut act, mut rew, mut term, mut tout, mut qpos, mut qvel) =
            (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
        for ep in 0..2 {
            let mut o = env.reset(Some(ep)).unwrap();
            for t in 0..5 {
                qpos.extend(env.qpos().iter().map(|v| *v as f32));
                qvel.extend(env.qvel().iter().map(|v| *v as f32));
                let a = [0.5f32, -0.5, 0.25];
                let s = env.step(&a).unwrap();
                obs.extend(&o);
                act.extend(a);
                rew.push(s.reward as f32);
                term.push(0.0);
                tout.push(if t == 4 { 1.0 } else { 0.0 });
                o = s.obs;
            }
        }
        let n = rew.len();
        let mut infos = BTreeMap::new();
        infos.insert("infos/qpos".to_string(), Column { shape: vec![n, 6], dtype: Dtype::Float32, data: qpos });
        infos.insert("infos/qvel".to_string(), Column { shape: vec![n, 6], dtype: Dtype::Float32, data: qvel });
        let ds = D4rlDataset {
            source: path.to_path_buf(),
            obs_dim: 11,
            act_dim: 3,
            observations: obs,
            actions: act,
            rewards: rew,
            terminals: term,
            timeouts: Some(tout),
            next_observations: None,
            infos,
            metadata: BTreeMap::new(),
            dtypes: BTreeMap::new(),
        };
        ds.write(path).unwrap();
    }

    #[test]
    fn dataset_episodes_become_series_and_moving_bodies() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("tiny-hopper.hdf5");
        hopper_file(&file);
        let out = d.path().join("tiny.rrd");
        let args = ViewArgs {
            dataset: file.display().to_string(),
            episodes: 1,
            env: Some("hopper-v2".into()),
            out: Some(out.clone()),
            rerun: RerunArgs::default(),
            lerobot: Default::default(),
        };
        run(args).unwrap();
        let chunks = chunks(&rrd("print", &out).unwrap());
        let rows = |entity: &str| chunks.iter().filter(|c| c.entity == entity).map(|c| c.rows).sum::<usize>();
        // One episode of five rows; the torso (body 1) moves on the dataset_step timeline.
        assert_eq!(rows("/episode/observation"), 5 + 1); // five steps plus the static series names
        assert_eq!(rows("/episode/reward"), 5);
        assert_eq!(rows("/episode/world/torso"), 5);
        assert!(chunks
            .iter()
            .any(|c| c.entity == "/episode/world/torso" && c.timelines.iter().any(|t| t == "dataset_step")));
        assert!(chunks.iter().any(|c| c.entity.starts_with("/episode/world/thigh/geom")), "thigh geometry missing");
        // The dataset layout's panels show only what was logged; its camera follows the torso.
        let mut env = o2o_envs::make_unwrapped("hopper-v2").unwrap();
        env.reset(Some(0)).unwrap();
        let layout = dataset_layout(camera_for(&model_geometry(&env), &body_poses(&env)), true);
        for e in layout.entities() {
            assert!(
                chunks.iter().any(|c| c.entity == e || c.entity.starts_with(&format!("{e}/"))),
                "the dataset layout shows {e}, never logged"
            );
        }
        assert_eq!(rows("/episode/return"), 1);
        assert!(chunks.iter().any(|c| c.entity.ends_with("/EyeControls3D")), "no camera in the blueprint");
    }
}
