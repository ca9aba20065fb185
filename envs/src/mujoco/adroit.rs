//! Adroit as D4RL defines it (`d4rl/hand_manipulation_suite/{pen,door,hammer,relocate}_v0.py`),
//! on the model files Gymnasium-Robotics 1.4.2 ships (byte-identical to D4RL's DAPG XMLs and
//! meshes, envsuites.md §3), loaded from the venv at run time.
//!
//! - model: `adroit_{task}.xml`; at load the wrist actuators get gain 10 / bias −10 and the
//!   finger actuators gain 1 / bias −1 (`A_WRJ1..A_WRJ0`, `A_FFJ3..A_THJ0`), as both codes do.
//!   Timestep 0.002, frame skip 5 → dt 0.01.
//! - action: a ∈ [−1, 1]ⁿ, clipped, then `ctrl = mid + a·rng` over the `ctrlrange`.
//! - reset: `qpos0`, zero `qvel`, and a per-episode change of the *model*: door frame position
//!   x ~ U(−0.3, −0.2), y ~ U(0.25, 0.35), z ~ U(0.252, 0.35); hammer board z ~ U(0.1, 0.25);
//!   relocate object x ~ U(−0.15, 0.15), y ~ U(−0.15, 0.3), target site x, y ~ U(−0.2, 0.2),
//!   z ~ U(0.15, 0.35); pen target orientation from Euler (U(−1, 1), U(−1, 1), 0).
//! - rewards: D4RL's dense reward with bonuses. The hand–object term is −0.1·‖palm − object‖
//!   (D4RL's sign; Gymnasium-Robotics 1.4.2 has +0.1 for door, hammer, relocate).
//! - pen: −‖pen − goal‖ + cos-similarity of the orientations, +10 / +50 bonuses, and −5 with
//!   `terminated` when the pen falls below z = 0.075 (D4RL; Gymnasium-Robotics never terminates).
//!   Time limits (registry): pen 100, the others 200.
//! - success (`info.success`): pen dist < 0.075 and similarity > 0.95; door hinge ≥ 1.35;
//!   hammer nail–goal < 0.01; relocate object–target < 0.1.
//!
//! **Binary reward** ([`Adroit::binary`], the `{pen,door,relocate}-binary-v0` ids of Cal-QL, WSRL
//! and RLPD): the same env with `reward = 1[success] − 1` (−1 per step, 0 at the goal) and no pen
//! drop termination, as the AWAC `mj_envs` fork defines `reward_type="binary"` (read in its ports:
//! d4rl_slim `envs/adroit_binary/{pen,door,relocate}_v0.py`, `reward = goal_achieved - 1`,
//! `early_termination=False`, horizons 100/200/200); and `terminated` at the goal, as WSRL's
//! `AdroitTerminalWrapper` (`wsrl/envs/wrappers`) and Cal-QL's `TrajSampler` (`JaxCQL/sampler.py`:
//! "terminate the episode when goal is achieved in Adroit envs") run it. RLPD steps the fork's env
//! without that wrapper (episodes always run to the time limit): a difference its presets note.

use super::noise::EnvRng;
use super::{cached_model, ActionMap, Data, Task};
use crate::env::Info;
use crate::error::EnvError;
use mujoco_rs::prelude::*;
use rand::Rng;
use std::path::PathBuf;
use std::sync::Arc;

/// Which Adroit task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdroitKind {
    /// Re-orient a pen to a random target orientation (`pen-v1`).
    Pen,
    /// Open a door by its latch (`door-v1`).
    Door,
    /// Drive a nail with a hammer (`hammer-v1`).
    Hammer,
    /// Move a ball to a random target (`relocate-v1`).
    Relocate,
}

/// Indices the task reads, resolved once from the model's names.
#[derive(Debug, Clone, Default)]
struct Ids {
    grasp_site: usize,
    object_body: usize,
    /// door: the `frame` body; hammer: `nail_board`; pen: `target`; relocate: the object body.
    moved_body: usize,
    handle_site: usize,
    door_hinge_dof: usize,
    tool_site: usize,
    nail_site: usize,
    goal_site: usize,
    nail_sensor_adr: usize,
    eps_ball_site: usize,
    obj_top: usize,
    obj_bottom: usize,
    tar_top: usize,
    tar_bottom: usize,
    /// The five fingertip sites (`S_fftip` … `S_thtip`), for the viewer's markers.
    tips: Vec<(&'static str, usize)>,
}

/// One Adroit task.
#[derive(Debug, Clone)]
pub struct Adroit {
    kind: AdroitKind,
    /// The binary reward (`1[success] − 1`, terminated at the goal) instead of D4RL's dense one.
    binary: bool,
    ids: Ids,
    /// The episode's model changes: door frame / board / object body position, relocate target
    /// site position, pen target quaternion.
    body_pos: [f64; 3],
    site_pos: [f64; 3],
    body_quat: [f64; 4],
    pen_length: f64,
    tar_length: f64,
}

fn id(what: &str, found: Option<usize>) -> Result<usize, String> {
    found.ok_or_else(|| format!("the Adroit model has no {what}"))
}

impl Adroit {
    /// The task of `kind`.
    pub fn new(kind: AdroitKind) -> Self {
        Self {
            kind,
            binary: false,
            ids: Ids::default(),
            body_pos: [0.0; 3],
            site_pos: [0.0; 3],
            body_quat: [1.0, 0.0, 0.0, 0.0],
            pen_length: 1.0,
            tar_length: 1.0,
        }
    }

    /// The task of `kind` with the binary reward of the `*-binary-v0` ids (module docs).
    pub fn binary(kind: AdroitKind) -> Self {
        Self { binary: true, ..Self::new(kind) }
    }

    /// Whether the reward is the binary one.
    pub fn is_binary(&self) -> bool {
        self.binary
    }

    /// Which task.
    pub fn kind(&self) -> AdroitKind {
        self.kind
    }

    fn resolve(&mut self, m: &MjModel) -> Result<(), String> {
        let body = |n: &str| id(&format!("body `{n}`"), m.body(n).map(|b| b.id));
        let site = |n: &str| id(&format!("site `{n}`"), m.site(n).map(|s| s.id));
        let tips = TIPS.iter().filter_map(|(name, site)| m.site(site).map(|s| (*name, s.id))).collect();
        let mut ids = Ids { grasp_site: site("S_grasp")?, tips, ..Ids::default() };
        match self.kind {
            AdroitKind::Door => {
                ids.handle_site = site("S_handle")?;
                ids.moved_body = body("frame")?;
                let hinge = id("joint `door_hinge`", m.joint("door_hinge").map(|j| j.id))?;
                ids.door_hinge_dof = m.jnt_dofadr()[hinge] as usize;
            }
            AdroitKind::Hammer => {
                ids.object_body = body("Object")?;
                ids.tool_site = site("tool")?;
                ids.nail_site = site("S_target")?;
                ids.goal_site = site("nail_goal")?;
                ids.moved_body = body("nail_board")?;
                // Both D4RL and Gymnasium-Robotics index `sensordata` by the sensor's id.
                ids.nail_sensor_adr = id("sensor `S_nail`", m.sensor("S_nail").map(|s| s.id))?;
            }
            AdroitKind::Pen => {
                ids.object_body = body("Object")?;
                ids.moved_body = body("target")?;
                ids.eps_ball_site = site("eps_ball")?;
                ids.obj_top = site("object_top")?;
                ids.obj_bottom = site("object_bottom")?;
                ids.tar_top = site("target_top")?;
                ids.tar_bottom = site("target_bottom")?;
            }
            AdroitKind::Relocate => {
                ids.object_body = body("Object")?;
                ids.moved_body = ids.object_body;
                ids.nail_site = site("target")?;
            }
        }
        self.ids = ids;
        Ok(())
    }
}

/// Marker names and site names of the fingertips.
const TIPS: [(&str, &str); 5] =
    [("fftip", "S_fftip"), ("mftip", "S_mftip"), ("rftip", "S_rftip"), ("lftip", "S_lftip"), ("thtip", "S_thtip")];

/// Euler (x, y, z) → quaternion wxyz in Gymnasium-Robotics' `rotations.euler2quat` convention.
fn euler2quat(e: [f64; 3]) -> [f64; 4] {
    let (ai, aj, ak) = (e[2] / 2.0, -e[1] / 2.0, e[0] / 2.0);
    let (si, sj, sk) = (ai.sin(), aj.sin(), ak.sin());
    let (ci, cj, ck) = (ai.cos(), aj.cos(), ak.cos());
    let (cc, cs, sc, ss) = (ci * ck, ci * sk, si * ck, si * sk);
    [cj * cc + sj * ss, cj * cs - sj * sc, -(cj * ss + sj * cc), cj * sc - sj * cs]
}

/// Quaternion wxyz → Euler angles, as `rotations.quat2euler` (= mat2euler ∘ quat2mat).
fn quat2euler(q: [f64; 4]) -> [f64; 3] {
    let [w, x, y, z] = q;
    let nq = w * w + x * x + y * y + z * z;
    let m = if nq > f64::EPSILON {
        let s = 2.0 / nq;
        let (xs, ys, zs) = (x * s, y * s, z * s);
        let (wx, wy, wz) = (w * xs, w * ys, w * zs);
        let (xx, xy, xz) = (x * xs, x * ys, x * zs);
        let (yy, yz, zz) = (y * ys, y * zs, z * zs);
        [[1.0 - (yy + zz), xy - wz, xz + wy], [xy + wz, 1.0 - (xx + zz), yz - wx], [xz - wy, yz + wx, 1.0 - (xx + yy)]]
    } else {
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    };
    let cy = (m[2][2] * m[2][2] + m[1][2] * m[1][2]).sqrt();
    if cy > 4.0 * f64::EPSILON {
        [-m[1][2].atan2(m[2][2]), -(-m[0][2]).atan2(cy), -m[0][1].atan2(m[0][0])]
    } else {
        [0.0, -(-m[0][2]).atan2(cy), -(-m[1][0]).atan2(m[1][1])]
    }
}

/// ‖a − b‖ for 3-vectors, as NumPy's `linalg.norm` computes it: √(Σ dᵢ²).
fn dist(a: [f64; 3], b: [f64; 3]) -> f64 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

/// The pen's and the target's unit-length axes (top − bottom) / length.
fn pen_axes(t: &Adroit, d: &Data) -> ([f64; 3], [f64; 3]) {
    let s = d.site_xpos();
    let o = sub(s[t.ids.obj_top], s[t.ids.obj_bottom]).map(|v| v / t.pen_length);
    let g = sub(s[t.ids.tar_top], s[t.ids.tar_bottom]).map(|v| v / t.tar_length);
    (o, g)
}

fn push(out: &mut [f64], at: &mut usize, values: &[f64]) {
    out[*at..*at + values.len()].copy_from_slice(values);
    *at += values.len();
}

impl Task for Adroit {
    fn xml_file(&self) -> &'static str {
        match self.kind {
            AdroitKind::Pen => "adroit_pen.xml",
            AdroitKind::Door => "adroit_door.xml",
            AdroitKind::Hammer => "adroit_hammer.xml",
            AdroitKind::Relocate => "adroit_relocate.xml",
        }
    }

    /// The XML from Gymnasium-Robotics' assets with D4RL's actuator gain and bias overrides.
    fn model(&self) -> Result<Arc<MjModel>, EnvError> {
        let path = crate::assets::adroit_assets_dir()?.join(self.xml_file());
        let key = PathBuf::from(format!("{}#d4rl-gains", path.display()));
        cached_model(&key, || {
            let mut m = MjModel::from_xml(&path).map_err(|e| e.to_string())?;
            let act = |n: &str| m.actuator(n).map(|a| a.id).ok_or(format!("{} has no actuator `{n}`", path.display()));
            let (wrist, fingers) = ((act("A_WRJ1")?, act("A_WRJ0")?), (act("A_FFJ3")?, act("A_THJ0")?));
            for ((lo, hi), gain) in [(wrist, 10.0), (fingers, 1.0)] {
                for a in lo..=hi {
                    // SAFETY: plain numeric parameters of actuators that exist; no sizes change.
                    unsafe {
                        m.actuator_gainprm_mut()[a][..3].copy_from_slice(&[gain, 0.0, 0.0]);
                        m.actuator_biasprm_mut()[a][..3].copy_from_slice(&[0.0, -gain, 0.0]);
                    }
                }
            }
            Ok(m)
        })
    }

    fn frame_skip(&self) -> usize {
        5
    }

    fn model_is_gym_asset(&self) -> bool {
        false
    }

    /// The palm and fingertips, the object (door handle, hammer, pen, ball) with its path, and
    /// the target (nail, pen goal, relocate target).
    fn markers(&self, d: &Data) -> Vec<super::Marker> {
        use super::Marker;
        let s = d.site_xpos();
        let mut out = vec![Marker { name: "palm", pos: s[self.ids.grasp_site], trail: false }];
        out.extend(self.ids.tips.iter().map(|&(name, i)| Marker { name, pos: s[i], trail: false }));
        let (object, target) = match self.kind {
            AdroitKind::Door => (s[self.ids.handle_site], None),
            AdroitKind::Hammer => (d.xpos()[self.ids.object_body], Some(s[self.ids.nail_site])),
            AdroitKind::Pen => (d.xpos()[self.ids.object_body], Some(s[self.ids.eps_ball_site])),
            AdroitKind::Relocate => (d.xpos()[self.ids.object_body], Some(s[self.ids.nail_site])),
        };
        out.push(Marker { name: "object", pos: object, trail: true });
        out.extend(target.map(|pos| Marker { name: "target", pos, trail: false }));
        out
    }

    fn obs_dim(&self, _model: &MjModel) -> usize {
        match self.kind {
            AdroitKind::Pen => 45,
            AdroitKind::Door => 39,
            AdroitKind::Hammer => 46,
            AdroitKind::Relocate => 39,
        }
    }

    fn action_map(&self) -> ActionMap {
        ActionMap::Centered
    }

    fn prepare(&mut self, model: &MjModel) -> Result<(), EnvError> {
        self.resolve(model).map_err(EnvError::Other)
    }

    fn begin_episode(&mut self, rng: &mut EnvRng) {
        let mut u = |lo: f64, hi: f64| lo + (hi - lo) * rng.gen::<f64>();
        match self.kind {
            AdroitKind::Door => self.body_pos = [u(-0.3, -0.2), u(0.25, 0.35), u(0.252, 0.35)],
            AdroitKind::Hammer => self.body_pos[2] = u(0.1, 0.25),
            AdroitKind::Pen => self.body_quat = euler2quat([u(-1.0, 1.0), u(-1.0, 1.0), 0.0]),
            AdroitKind::Relocate => {
                self.body_pos[0] = u(-0.15, 0.15);
                self.body_pos[1] = u(-0.15, 0.3);
                self.site_pos = [u(-0.2, 0.2), u(-0.2, 0.2), u(0.15, 0.35)];
            }
        }
    }

    fn changes_model(&self) -> bool {
        true
    }

    fn episode_model(&mut self, base: &MjModel, m: &mut MjModel) {
        let b = self.ids.moved_body;
        match self.kind {
            AdroitKind::Pen => m.body_quat_mut()[b] = self.body_quat,
            AdroitKind::Hammer => {
                // Only z is drawn; x and y stay the model's.
                let p = base.body_pos()[b];
                self.body_pos[0] = p[0];
                self.body_pos[1] = p[1];
                m.body_pos_mut()[b] = self.body_pos;
            }
            AdroitKind::Relocate => {
                self.body_pos[2] = base.body_pos()[b][2];
                m.body_pos_mut()[b] = self.body_pos;
                m.site_pos_mut()[self.ids.nail_site] = self.site_pos;
            }
            AdroitKind::Door => m.body_pos_mut()[b] = self.body_pos,
        }
    }

    /// The per-episode model values, named as Gymnasium-Robotics' `initial_state_dict` keys
    /// (what a parity check hands the oracle).
    fn episode_state(&self) -> Vec<(&'static str, Vec<f64>)> {
        match self.kind {
            AdroitKind::Door => vec![("door_body_pos", self.body_pos.to_vec())],
            AdroitKind::Hammer => vec![("board_pos", self.body_pos.to_vec())],
            AdroitKind::Pen => vec![("desired_orien", self.body_quat.to_vec())],
            AdroitKind::Relocate => vec![("obj_pos", self.body_pos.to_vec()), ("target_pos", self.site_pos.to_vec())],
        }
    }

    fn after_reset(&mut self, data: &Data) {
        if self.kind == AdroitKind::Pen {
            let s = data.site_xpos();
            self.pen_length = dist(s[self.ids.obj_top], s[self.ids.obj_bottom]);
            self.tar_length = dist(s[self.ids.tar_top], s[self.ids.tar_bottom]);
        }
    }

    /// Nothing: D4RL starts every episode at `qpos0` with zero velocity.
    fn reset_noise(&self, _rng: &mut EnvRng, _qpos: &mut [f64], _qvel: &mut [f64]) {}

    fn observe(&self, d: &Data, out: &mut [f64]) {
        let (qpos, qvel, s) = (d.qpos(), d.qvel(), d.site_xpos());
        let mut at = 0;
        match self.kind {
            // qpos[1..-2], latch, hinge, palm, handle, palm − handle, door open ±1.
            AdroitKind::Door => {
                let (palm, handle) = (s[self.ids.grasp_site], s[self.ids.handle_site]);
                let door = qpos[self.ids.door_hinge_dof];
                push(out, &mut at, &qpos[1..qpos.len() - 2]);
                push(out, &mut at, &[qpos[qpos.len() - 1], door]);
                push(out, &mut at, &palm);
                push(out, &mut at, &handle);
                push(out, &mut at, &sub(palm, handle));
                push(out, &mut at, &[if door > 1.0 { 1.0 } else { -1.0 }]);
            }
            // qpos[..-6], clip(qvel, ±1)[-6..], palm, hammer pos, hammer Euler, nail, clip(impact, ±1).
            AdroitKind::Hammer => {
                push(out, &mut at, &qpos[..qpos.len() - 6]);
                let v: Vec<f64> = qvel[qvel.len() - 6..].iter().map(|v| v.clamp(-1.0, 1.0)).collect();
                push(out, &mut at, &v);
                push(out, &mut at, &s[self.ids.grasp_site]);
                push(out, &mut at, &d.xpos()[self.ids.object_body]);
                push(out, &mut at, &quat2euler(d.xquat()[self.ids.object_body]));
                push(out, &mut at, &s[self.ids.nail_site]);
                push(out, &mut at, &[d.sensordata()[self.ids.nail_sensor_adr].clamp(-1.0, 1.0)]);
            }
            // qpos[..-6], pen pos, pen qvel[-6..], pen axis, target axis, pos − goal, axis − target.
            AdroitKind::Pen => {
                let pos = d.xpos()[self.ids.object_body];
                let (o, g) = pen_axes(self, d);
                push(out, &mut at, &qpos[..qpos.len() - 6]);
                push(out, &mut at, &pos);
                push(out, &mut at, &qvel[qvel.len() - 6..]);
                push(out, &mut at, &o);
                push(out, &mut at, &g);
                push(out, &mut at, &sub(pos, s[self.ids.eps_ball_site]));
                push(out, &mut at, &sub(o, g));
            }
            // qpos[..-6], palm − ball, palm − target, ball − target.
            AdroitKind::Relocate => {
                let (ball, palm, target) =
                    (d.xpos()[self.ids.object_body], s[self.ids.grasp_site], s[self.ids.nail_site]);
                push(out, &mut at, &qpos[..qpos.len() - 6]);
                push(out, &mut at, &sub(palm, ball));
                push(out, &mut at, &sub(palm, target));
                push(out, &mut at, &sub(ball, target));
            }
        }
    }

    fn reward(&self, d: &Data, _before: [f64; 2], _action: &[f64], _dt: f64, info: &mut Info) -> (f64, bool) {
        let s = d.site_xpos();
        let palm = s[self.ids.grasp_site];
        let (reward, terminated, success) = match self.kind {
            // −0.1‖palm − handle‖ − 0.1(h − 1.57)² − 1e−5‖qvel‖² + 2[h>0.2] + 8[h>1.0] + 10[h>1.35]
            AdroitKind::Door => {
                let h = d.qpos()[self.ids.door_hinge_dof];
                let mut r = -0.1 * dist(palm, s[self.ids.handle_site]);
                r += -0.1 * (h - 1.57) * (h - 1.57);
                r += -1e-5 * d.qvel().iter().map(|v| v * v).sum::<f64>();
                r += [(0.2, 2.0), (1.0, 8.0), (1.35, 10.0)].iter().filter(|(t, _)| h > *t).map(|(_, b)| b).sum::<f64>();
                info.set("door_hinge", h);
                (r, false, h >= 1.35)
            }
            // −0.1‖palm − hammer‖ − ‖head − nail‖ − 10‖nail − goal‖ − 0.01‖qvel‖ + 2[lifted] + 25[<0.02] + 75[<0.01]
            AdroitKind::Hammer => {
                let hammer = d.xpos()[self.ids.object_body];
                let (head, nail, goal) = (s[self.ids.tool_site], s[self.ids.nail_site], s[self.ids.goal_site]);
                let g = dist(nail, goal);
                let mut r = -0.1 * dist(palm, hammer);
                r -= dist(head, nail);
                r -= 10.0 * g;
                r -= 0.01 * d.qvel().iter().map(|v| v * v).sum::<f64>().sqrt();
                if hammer[2] > 0.04 && head[2] > 0.04 {
                    r += 2.0;
                }
                if g < 0.02 {
                    r += 25.0;
                }
                if g < 0.01 {
                    r += 75.0;
                }
                info.set("nail_goal_distance", g);
                (r, false, g < 0.01)
            }
            // −‖pen − goal‖ + ⟨axis, target⟩ + 10 + 50 bonuses; −5 and terminated when dropped
            AdroitKind::Pen => {
                let pos = d.xpos()[self.ids.object_body];
                let g = dist(pos, s[self.ids.eps_ball_site]);
                let (o, t) = pen_axes(self, d);
                let sim = o[0] * t[0] + o[1] * t[1] + o[2] * t[2];
                let mut r = -g + sim;
                if g < 0.075 && sim > 0.9 {
                    r += 10.0;
                }
                if g < 0.075 && sim > 0.95 {
                    r += 50.0;
                }
                let dropped = pos[2] < 0.075;
                if dropped {
                    r -= 5.0;
                }
                info.set("goal_distance", g);
                info.set("orientation_similarity", sim);
                (r, dropped, g < 0.075 && sim > 0.95)
            }
            // −0.1‖palm − ball‖ + [lifted](1 − 0.5‖palm − target‖ − 0.5‖ball − target‖) + 10[<0.1] + 20[<0.05]
            AdroitKind::Relocate => {
                let (ball, target) = (d.xpos()[self.ids.object_body], s[self.ids.nail_site]);
                let g = dist(ball, target);
                let mut r = -0.1 * dist(palm, ball);
                if ball[2] > 0.04 {
                    r += 1.0;
                    r += -0.5 * dist(palm, target);
                    r += -0.5 * g;
                }
                if g < 0.1 {
                    r += 10.0;
                }
                if g < 0.05 {
                    r += 20.0;
                }
                info.set("goal_distance", g);
                (r, false, g < 0.1)
            }
        };
        info.success = Some(success);
        if self.binary {
            // r = 1[success] − 1; the episode ends at the goal (WSRL / Cal-QL), never on a drop.
            return (if success { 0.0 } else { -1.0 }, success);
        }
        (reward, terminated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn euler_quaternion_round_trip() {
        for e in [[0.3, -0.7, 0.0], [-1.0, 1.0, 0.0], [0.0, 0.0, 0.0]] {
            let q = euler2quat(e);
            let n: f64 = q.iter().map(|v| v * v).sum();
            assert!((n - 1.0).abs() < 1e-12);
            let back = quat2euler(q);
            for k in 0..3 {
                assert!((back[k] - e[k]).abs() < 1e-12, "{e:?} → {q:?} → {back:?}");
            }
        }
    }
}
