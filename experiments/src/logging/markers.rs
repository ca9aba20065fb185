//! The task's own points in the 3D view ([`o2o_envs::mujoco::Task::markers`]): AntMaze's goal
//! (drawn as the 0.5-radius ball the ant must enter) and the ant, whose path over the episode is a
//! line; Adroit's palm and fingertips, the object with its path, and the target.
//!
//! Entities, on the episode timelines (`eval_step`, `episode_step`):
//! - `episode/world/markers/<name>`: one point per marker per step;
//! - `episode/world/paths/<name>`: the trail of a `trail` marker so far, redrawn every
//!   [`PATH_EVERY`] steps; when the evaluation's result arrives, the whole path at the episode's
//!   last step and on the training timelines, so scrubbing the run shows how the ant's route
//!   changed from one evaluation to the next.
//!
//! The maze walls need nothing here: they are box geoms of the world body, drawn with the rest of
//! the model's static geometry.

use anyhow::Result;
use o2o_envs::mujoco::Marker;
use rerun::RecordingStream;

/// Steps between redraws of a path (a path is O(steps) points; redrawing it every step would
/// make a 1000-step AntMaze episode cost O(steps²)).
pub const PATH_EVERY: u64 = 10;

/// Colour (RGBA) and radius of a marker by name.
fn style(name: &str) -> ([u8; 4], f32) {
    match name {
        // D4RL's success radius: the ant's centre must come within 0.5 of the goal.
        "goal" => ([40, 200, 80, 110], 0.5),
        "ant" => ([220, 60, 40, 255], 0.15),
        "target" => ([40, 200, 80, 255], 0.02),
        "object" => ([240, 150, 30, 255], 0.025),
        "palm" => ([60, 110, 230, 255], 0.02),
        _ => ([120, 160, 240, 255], 0.012),
    }
}

fn color(c: [u8; 4]) -> rerun::Color {
    rerun::Color::from_unmultiplied_rgba(c[0], c[1], c[2], c[3])
}

/// The paths of one episode's `trail` markers.
#[derive(Default)]
pub struct Trails(Vec<(&'static str, Vec<[f32; 3]>)>);

impl Trails {
    /// Add this step's positions of the `trail` markers.
    pub fn push(&mut self, markers: &[Marker]) {
        for m in markers.iter().filter(|m| m.trail) {
            let p = m.pos.map(|x| x as f32);
            match self.0.iter_mut().find(|(n, _)| *n == m.name) {
                Some((_, path)) => path.push(p),
                None => self.0.push((m.name, vec![p])),
            }
        }
    }

    /// Log every path at the current time.
    pub fn log(&self, rec: &RecordingStream) -> Result<()> {
        for (name, path) in &self.0 {
            let (c, r) = style(name);
            let strip = rerun::LineStrips3D::new([path.clone()]).with_colors([color(c)]).with_radii([r * 0.3]);
            rec.log(format!("episode/world/paths/{name}"), &strip)?;
        }
        Ok(())
    }
}

/// Log this step's markers at the current time.
pub fn log_markers(rec: &RecordingStream, markers: &[Marker]) -> Result<()> {
    for m in markers {
        let (c, r) = style(m.name);
        let point = rerun::Points3D::new([m.pos.map(|x| x as f32)]).with_colors([color(c)]).with_radii([r]);
        rec.log(format!("episode/world/markers/{}", m.name), &point)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::logging::inspect::{chunks, rrd};
    use crate::logging::record_env::{RecordingEnv, StepNotes};
    use crate::logging::rerun_sink::{save_stream, FILE_FLUSH_TIMEOUT};
    use crate::logging::{MetricSink, Record, RerunSink};
    use o2o_envs::wrappers::TimeLimit;
    use o2o_envs::Env;

    /// One recorded 25-step evaluation episode of `id` followed by its evaluation result; the
    /// recording's chunks as (entity, timelines), and the env's geom names.
    fn record(id: &str) -> (Vec<(String, Vec<String>)>, Vec<Option<String>>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("view.rrd");
        let mut sink = RerunSink::new(
            save_stream(&path, "markers", &crate::logging::layout::dataset_layout(None, false)).unwrap(),
            4096,
            FILE_FLUSH_TIMEOUT,
        )
        .unwrap();
        let inner = o2o_envs::make_unwrapped(id).unwrap();
        let names = inner.geoms().into_iter().map(|g| g.name).collect();
        let mut env =
            RecordingEnv::new(TimeLimit::new(inner, 25), sink.episode_logger().unwrap(), StepNotes::default());
        let act = env.action_space().dim();
        env.reset(Some(0)).unwrap();
        for t in 0..25 {
            let a: Vec<f32> = (0..act).map(|k| ((t * 5 + k * 3) % 7) as f32 / 3.5 - 1.0).collect();
            if env.step(&a).unwrap().done() {
                break;
            }
        }
        sink.record(&Record { grad_step: 10, env_step: 0, wall_s: 1.0, values: &[("eval/return", 0.0)] }).unwrap();
        drop(env);
        assert_eq!(sink.finish(), 0, "nothing dropped");
        let printed = rrd("print", &path).unwrap();
        (chunks(&printed).into_iter().map(|c| (c.entity, c.timelines)).collect(), names)
    }

    fn has(chunks: &[(String, Vec<String>)], entity: &str, timeline: &str) -> bool {
        chunks.iter().any(|(e, t)| e == entity && t.iter().any(|x| x == timeline))
    }

    /// AntMaze: the maze walls (one static box per wall cell of the map, scaled 4), the goal and
    /// the ant each step, and the ant's path on the episode and the training timelines.
    #[test]
    fn antmaze_episodes_show_walls_goal_and_the_ants_path() {
        let (chunks, names) = record("antmaze-umaze-v2");
        let walls: Vec<usize> = names
            .iter()
            .enumerate()
            .filter(|(_, n)| n.as_deref().is_some_and(|n| n.starts_with("block_")))
            .map(|(i, _)| i)
            .collect();
        // U_MAZE_TEST: the 5 × 5 border (16 cells) and the inner wall (cells 2_1, 2_2).
        assert_eq!(walls.len(), 18, "{names:?}");
        for i in walls {
            let entity = format!("/episode/world/world/geom{i}");
            assert!(chunks.iter().any(|(e, t)| *e == entity && t.is_empty()), "static wall {entity} missing");
        }
        for marker in ["goal", "ant"] {
            assert!(has(&chunks, &format!("/episode/world/markers/{marker}"), "episode_step"), "marker {marker}");
        }
        assert!(has(&chunks, "/episode/world/paths/ant", "episode_step"), "the ant's path on the episode timeline");
        assert!(
            has(&chunks, "/episode/world/paths/ant", "grad_step"),
            "the ant's path at the evaluation, on the training timelines"
        );
    }

    /// Adroit: the palm, the five fingertips, the object (with its path) and the target.
    #[test]
    fn adroit_episodes_show_hand_and_object() {
        let (chunks, _) = record("relocate-v1");
        for marker in ["palm", "fftip", "mftip", "rftip", "lftip", "thtip", "object", "target"] {
            assert!(has(&chunks, &format!("/episode/world/markers/{marker}"), "episode_step"), "marker {marker}");
        }
        assert!(has(&chunks, "/episode/world/paths/object", "episode_step"));
        let (door, _) = record("door-binary-v0");
        assert!(
            has(&door, "/episode/world/markers/object", "episode_step")
                && !door.iter().any(|(e, _)| e == "/episode/world/markers/target")
        );
    }
}
