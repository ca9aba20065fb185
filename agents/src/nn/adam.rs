//! Adam (Kingma & Ba 2015, arXiv 1412.6980) with state we can checkpoint.
//!
//! tch's built-in optimizer hides Adam's moments, so a checkpoint could not restore them and a
//! resumed run would diverge from an uninterrupted one. This one keeps, per parameter, the
//! first and second moments `m`, `v` and one shared step count `t`:
//! `m ← β₁ m + (1 − β₁) g`, `v ← β₂ v + (1 − β₂) g²`,
//! `θ ← θ − lr · m̂ / (√v̂ + ε)` with `m̂ = m / (1 − β₁ᵗ)`, `v̂ = v / (1 − β₂ᵗ)` — the PyTorch /
//! optax formulation (ε outside the square root). Gradients are passed in (from
//! `Tensor::run_backward`), so no `.grad` buffers need zeroing and a loss only differentiates
//! the parameters its optimizer owns.
//!
//! Like the weights, which a checkpoint restores by copying into them in place, the moments and
//! the step count can be restored and reset through a shared reference
//! ([`Adam::set_steps`], [`Adam::reset`]), so an agent's list of its parts serves saving,
//! loading and resetting alike ([`crate::checkpoint::Stateful`]).

use super::floats::{floats, floats_mut};
use super::ParamSet;
use std::cell::Cell;
use tch::{Kind, Tensor};

/// Adam state for one [`ParamSet`].
#[derive(Debug)]
pub struct Adam {
    /// Learning rate (a schedule may change it between steps).
    pub lr: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    step: Cell<i64>,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
}

impl Adam {
    /// Zero moments for every tensor of `params`; β = (0.9, 0.999), ε = 1e-8.
    pub fn new(params: &ParamSet, lr: f64) -> Self {
        let zeros = || params.named().iter().map(|(_, t)| t.detach().zeros_like()).collect::<Vec<_>>();
        Self { lr, beta1: 0.9, beta2: 0.999, eps: 1e-8, step: Cell::new(0), m: zeros(), v: zeros() }
    }

    /// The same optimizer with `ε = eps` (PPO: 1e-5).
    pub fn with_eps(mut self, eps: f64) -> Self {
        self.eps = eps;
        self
    }

    /// Number of steps taken.
    pub fn steps(&self) -> i64 {
        self.step.get()
    }

    /// Set the step count (when restoring a checkpoint).
    pub fn set_steps(&self, t: i64) {
        self.step.set(t);
    }

    /// Differentiate `loss` with respect to `params` only and take one step; returns nothing
    /// to read back, so no device synchronization happens here.
    pub fn minimize(&mut self, params: &ParamSet, loss: &Tensor) {
        let grads = Tensor::run_backward(&[loss], &params.tensors(), false, false);
        self.apply(params, &grads);
    }

    /// One Adam step with the given gradients (same order as `params`).
    pub fn apply(&mut self, params: &ParamSet, grads: &[Tensor]) {
        self.apply_tracked(params, grads, None);
    }

    /// One Adam step with a zero gradient: `m ← β₁ m`, `v ← β₂ v`, `t ← t + 1`, and the weights
    /// still move by `lr · m̂ / (√v̂ + ε)`. This is what optax does to an optimizer whose loss
    /// is the constant 0 when every optimizer is applied on every call (WSRL's high-UTD update,
    /// fidelity-audit D2); PyTorch would skip such an optimizer instead.
    pub fn idle_step(&mut self, params: &ParamSet) {
        let zeros: Vec<Tensor> = params.named().iter().map(|(_, t)| t.detach().zeros_like()).collect();
        self.apply_tracked(params, &zeros, None);
    }

    /// [`Adam::apply`], then the Polyak step `θ̄ ← θ̄ + τ (θ − θ̄)` of `target` (a copy of
    /// `params`' layout: same tensors in the same order) towards the new weights, as
    /// [`super::polyak_update`] would do after it; on the CPU both run in the same pass over
    /// each tensor, so the weights are read once.
    pub fn apply_and_track(&mut self, params: &ParamSet, grads: &[Tensor], target: &ParamSet, tau: f64) {
        assert_eq!(
            target.named().len(),
            params.named().len(),
            "Adam::apply_and_track: the target's parameter set differs in length"
        );
        self.apply_tracked(params, grads, Some((target, tau)));
    }

    fn apply_tracked(&mut self, params: &ParamSet, grads: &[Tensor], target: Option<(&ParamSet, f64)>) {
        self.step.set(self.step.get() + 1);
        let t = self.step.get() as i32;
        let bc1 = 1.0 - self.beta1.powi(t);
        let bc2 = 1.0 - self.beta2.powi(t);
        let step_size = self.lr / bc1;
        // θ += m / d with d = −(√v / √bc2 + ε) / step_size, i.e. θ −= step_size · m / (√v̂' + ε).
        let c1 = -1.0 / (step_size * bc2.sqrt());
        let c2 = -self.eps / step_size;
        let consts = [1.0 - self.beta1, 1.0 - self.beta2, c1, c2];
        tch::no_grad(|| {
            // Every float32 CPU tensor takes the fused pass, all of them in one split over the
            // thread team; any other (CUDA, non-contiguous, or every tensor with the generic
            // path forced, [`super::path`]) takes the tensor path.
            let mut fused = Vec::new();
            for (i, (((_, p), g), (m, v))) in
                params.named().iter().zip(grads).zip(self.m.iter().zip(&self.v)).enumerate()
            {
                let track = target.map(|(set, tau)| (&set.named()[i].1, tau));
                // SAFETY: the parameter, its fresh gradient, the optimizer's own moments and
                // the target's copy are distinct buffers that nothing else touches until
                // `fused_cpu_step` below returns, which ends the slices.
                if let Some(e) = unsafe { cpu_elems(p, g, m, v, track.map(|(t, _)| t)) } {
                    fused.push(e);
                    continue;
                }
                let (mut m, mut v) = (m.shallow_clone(), v.shallow_clone());
                let _ = m.lerp_(g, 1.0 - self.beta1);
                let _ = v.lerp_(&g.square(), 1.0 - self.beta2);
                if step_size != 0.0 {
                    // (lr = 0, e.g. the end of a cosine schedule: moments move, weights do not,
                    // as in PyTorch; the folded constants would divide by zero.)
                    let mut d = v.sqrt();
                    let _ = d.g_mul_scalar_(c1).g_add_scalar_(c2);
                    let _ = p.shallow_clone().addcdiv_(&m, &d);
                }
                if let Some((t, tau)) = track {
                    super::polyak::polyak_one(t, p, tau);
                }
            }
            let tau = target.map_or(0.0, |(_, tau)| tau);
            if !fused.is_empty() {
                super::path::hit();
            }
            fused_cpu_step(fused, consts, tau, step_size == 0.0);
        });
    }

    /// Moments as named tensors `{prefix}/m/{param}` and `{prefix}/v/{param}`, plus the step
    /// count `{prefix}/step` (a fresh `i64` tensor).
    pub fn state(&self, prefix: &str, params: &ParamSet) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        for ((name, _), (m, v)) in params.named().iter().zip(self.m.iter().zip(&self.v)) {
            out.push((format!("{prefix}/m/{name}"), m.shallow_clone()));
            out.push((format!("{prefix}/v/{name}"), v.shallow_clone()));
        }
        out
    }

    /// The step count as a tensor for a checkpoint.
    pub fn step_tensor(&self) -> Tensor {
        Tensor::from_slice(&[self.step.get()]).to_kind(Kind::Int64)
    }

    /// Forget the moments and the step count (a fresh optimizer on warm-started weights).
    pub fn reset(&self) {
        tch::no_grad(|| {
            for t in self.m.iter().chain(&self.v) {
                let _ = t.shallow_clone().zero_();
            }
        });
        self.step.set(0);
    }
}

/// Scale `grads` in place so their joint L2 norm is at most `max_norm` (PyTorch's
/// `clip_grad_norm_`: `g ← g · min(1, max_norm / (‖g‖ + 1e-6))`); returns the norm before.
pub fn clip_grad_norm(grads: &mut [Tensor], max_norm: f64) -> f64 {
    let norm = tch::no_grad(|| {
        grads
            .iter()
            .map(|g| g.square().sum(Kind::Double))
            .fold(Tensor::zeros([], (Kind::Double, tch::Device::Cpu)), |a, b| a + b.to_device(tch::Device::Cpu))
            .sqrt()
            .double_value(&[])
    });
    let scale = max_norm / (norm + 1e-6);
    if scale < 1.0 {
        tch::no_grad(|| {
            grads.iter_mut().for_each(|g| {
                let _ = g.g_mul_scalar_(scale);
            })
        });
    }
    norm
}

/// The step of [`Adam::apply`] on contiguous float32 CPU parameters as one pass over their
/// elements: `m += w₁ (g − m)`, `v += w₂ (g² − v)`, `θ += m / (c₁ √v + c₂)` (the tensor path's
/// `lerp_`, `sqrt`, scale, `addcdiv_`, which take seven passes over memory; for a 10-member
/// ensemble's 720k weights those passes cost about as much as a matmul layer), and with a
/// tracked target `θ̄ += τ (θ − θ̄)` (one multiply-add, as libtorch's `lerp_`).
///
/// All of a set's tensors are cut into one contiguous range of elements per thread of
/// libtorch's team, across tensor boundaries, and run in one parallel region: a 10-member
/// critic's small tensors (the first layer, biases, LayerNorm) no longer run on one thread
/// while the other waits, and one region replaces one per tensor. Each element's update is
/// independent of the others, so the result does not depend on the cut.
fn fused_cpu_step(elems: Vec<Elems<'_>>, [w1, w2, c1, c2]: [f64; 4], tau: f64, moments_only: bool) {
    let c = Consts { w1: w1 as f32, w2: w2 as f32, c1: c1 as f32, c2: c2 as f32, tau: tau as f32, moments_only };
    let total: usize = elems.iter().map(|e| e.p.len()).sum();
    let threads = super::team::pieces(total, 1 << 16);
    let per = total.div_ceil(threads.max(1)).max(1);
    let mut pieces: Vec<Vec<Elems<'_>>> = vec![Vec::new()];
    let mut room = per;
    for mut e in elems {
        while e.p.len() > room {
            let (head, tail) = e.split_at(room);
            pieces.last_mut().expect("a piece").push(head);
            pieces.push(Vec::new());
            e = tail;
            room = per;
        }
        room -= e.p.len();
        pieces.last_mut().expect("a piece").push(e);
    }
    super::team::run(pieces, |piece| piece.into_iter().for_each(|e| adam_elems(e, c)));
}

/// The slices of one parameter's fused step, or `None` (the tensor path) unless the parameter,
/// its gradient, moments and target are contiguous float32 CPU tensors of one size (and the
/// generic path is not forced, [`super::path::fast_cpu`]).
///
/// # Safety
/// The buffers must be distinct, and nothing else may read or write them while the returned
/// slices live.
unsafe fn cpu_elems<'a>(
    p: &'a Tensor,
    g: &'a Tensor,
    m: &'a Tensor,
    v: &'a Tensor,
    track: Option<&'a Tensor>,
) -> Option<Elems<'a>> {
    let n = p.numel();
    let ok = |t: &Tensor| super::path::fast_cpu(t) && t.is_contiguous() && t.numel() == n;
    if !(ok(p) && ok(g) && ok(m) && ok(v) && track.is_none_or(ok)) {
        return None;
    }
    // SAFETY: the caller's contract; each tensor was just checked to hold n contiguous floats.
    unsafe {
        Some(Elems {
            p: floats_mut(p),
            g: floats(g),
            m: floats_mut(m),
            v: floats_mut(v),
            t: track.map(|t| floats_mut(t)),
        })
    }
}

/// The step's constants (see [`fused_cpu_step`]).
#[derive(Clone, Copy)]
struct Consts {
    w1: f32,
    w2: f32,
    c1: f32,
    c2: f32,
    tau: f32,
    moments_only: bool,
}

/// One contiguous range of a parameter, its gradient, moments and (optionally) target.
struct Elems<'a> {
    p: &'a mut [f32],
    g: &'a [f32],
    m: &'a mut [f32],
    v: &'a mut [f32],
    t: Option<&'a mut [f32]>,
}

impl<'a> Elems<'a> {
    /// The first `k` elements and the rest.
    fn split_at(self, k: usize) -> (Elems<'a>, Elems<'a>) {
        let (p0, p1) = self.p.split_at_mut(k);
        let (g0, g1) = self.g.split_at(k);
        let (m0, m1) = self.m.split_at_mut(k);
        let (v0, v1) = self.v.split_at_mut(k);
        let (t0, t1) = match self.t {
            Some(t) => {
                let (a, b) = t.split_at_mut(k);
                (Some(a), Some(b))
            }
            None => (None, None),
        };
        (Elems { p: p0, g: g0, m: m0, v: v0, t: t0 }, Elems { p: p1, g: g1, m: m1, v: v1, t: t1 })
    }
}

/// The loop compiled with AVX2 and FMA where the CPU has them (eight elements per
/// instruction); the operations are IEEE's (`mul_add` is the fused multiply-add in both
/// builds), so either build gives the same bits.
fn adam_elems(e: Elems<'_>, c: Consts) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU was just checked for AVX-512F (FMA comes with it); the same IEEE
        // operations on 16 lanes, so the same bits as the AVX2 build.
        return unsafe { adam_elems_avx512(e, c) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU was just checked for AVX2 and FMA.
        return unsafe { adam_elems_avx2(e, c) };
    }
    adam_elems_plain(e, c)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn adam_elems_avx2(e: Elems<'_>, c: Consts) {
    adam_elems_plain(e, c)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn adam_elems_avx512(e: Elems<'_>, c: Consts) {
    adam_elems_plain(e, c)
}

#[inline(always)]
fn adam_elems_plain(e: Elems<'_>, c: Consts) {
    let Elems { p, g, m, v, t } = e;
    let adam = |pi: &mut f32, gi: f32, mi: &mut f32, vi: &mut f32| {
        *mi += c.w1 * (gi - *mi);
        *vi += c.w2 * (gi * gi - *vi);
        if !c.moments_only {
            *pi += *mi / (vi.sqrt() * c.c1 + c.c2);
        }
    };
    match t {
        Some(t) => {
            for (((pi, gi), (mi, vi)), ti) in p.iter_mut().zip(g).zip(m.iter_mut().zip(v.iter_mut())).zip(t.iter_mut())
            {
                adam(pi, *gi, mi, vi);
                *ti = c.tau.mul_add(*pi - *ti, *ti);
            }
        }
        None => {
            for ((pi, gi), (mi, vi)) in p.iter_mut().zip(g).zip(m.iter_mut().zip(v.iter_mut())) {
                adam(pi, *gi, mi, vi);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;

    /// Two steps on θ = 1 with gradients 0.5 then −1, against the formulas evaluated by hand.
    #[test]
    fn matches_hand_computed_steps() {
        let mut p = ParamSet::new();
        let th = p.add("w", Tensor::from_slice(&[1.0f32]), Device::Cpu);
        let lr = 0.1;
        let mut adam = Adam::new(&p, lr);
        adam.apply(&p, &[Tensor::from_slice(&[0.5f32])]);
        // t=1: m = 0.05, v = 0.00025, m̂ = 0.5, v̂ = 0.25 → θ = 1 − 0.1 · 0.5 / (0.5 + 1e-8).
        let want1 = 1.0 - lr * 0.5 / (0.5 + 1e-8);
        assert!((th.double_value(&[0]) - want1).abs() < 1e-6);
        adam.apply(&p, &[Tensor::from_slice(&[-1.0f32])]);
        // t=2: m = 0.9·0.05 + 0.1·(−1) = −0.055, v = 0.999·0.00025 + 0.001·1 = 0.00124975.
        let (m, v) = (-0.055f64, 0.00124975f64);
        let (mh, vh) = (m / (1.0 - 0.81), v / (1.0 - 0.999f64.powi(2)));
        let want2 = want1 - lr * mh / (vh.sqrt() + 1e-8);
        assert!((th.double_value(&[0]) - want2).abs() < 1e-6, "{} vs {want2}", th.double_value(&[0]));
        assert_eq!(adam.steps(), 2);
        let st = adam.state("opt", &p);
        assert_eq!(st[0].0, "opt/m/w");
        assert!((st[0].1.double_value(&[0]) - m).abs() < 1e-7);
        assert!((st[1].1.double_value(&[0]) - v).abs() < 1e-9);
    }

    /// A zero-gradient step decays both moments and still moves the weight by the decayed first
    /// moment: one real step with g = 0.5, then an idle one, against the formulas by hand.
    #[test]
    fn idle_step_decays_moments_and_moves_weights() {
        let mut p = ParamSet::new();
        let th = p.add("w", Tensor::from_slice(&[1.0f32]), Device::Cpu);
        let lr = 0.1;
        let mut adam = Adam::new(&p, lr);
        adam.apply(&p, &[Tensor::from_slice(&[0.5f32])]);
        let after1 = th.double_value(&[0]);
        adam.idle_step(&p);
        // t=2: m = 0.9·0.05 = 0.045, v = 0.999·0.00025 = 0.00024975.
        let (m, v) = (0.045f64, 0.00024975f64);
        let (mh, vh) = (m / (1.0 - 0.81), v / (1.0 - 0.999f64.powi(2)));
        let want = after1 - lr * mh / (vh.sqrt() + 1e-8);
        assert!((th.double_value(&[0]) - want).abs() < 1e-6, "{} vs {want}", th.double_value(&[0]));
        assert!(want < after1 - 0.05, "an idle step moves the weight by about lr");
        assert_eq!(adam.steps(), 2);
        let st = adam.state("opt", &p);
        assert!((st[0].1.double_value(&[0]) - m).abs() < 1e-7);
        assert!((st[1].1.double_value(&[0]) - v).abs() < 1e-9);
    }

    /// A learning rate of exactly 0 (the end of a cosine schedule) leaves the weights as they
    /// are and finite, while the moments still move.
    #[test]
    fn zero_learning_rate_keeps_weights() {
        let mut p = ParamSet::new();
        let th = p.add("w", Tensor::from_slice(&[1.5f32, -0.5]), Device::Cpu);
        let mut adam = Adam::new(&p, 0.0);
        adam.apply(&p, &[Tensor::from_slice(&[0.5f32, 2.0])]);
        assert_eq!(Vec::<f32>::try_from(&th).unwrap(), vec![1.5, -0.5]);
        let st = adam.state("opt", &p);
        assert!((st[0].1.double_value(&[0]) - 0.05).abs() < 1e-7, "m must still be updated");
    }

    /// The fused CPU pass and the tensor path (taken for a non-contiguous parameter) agree,
    /// with the Polyak target tracked in the same pass, for a small tensor and one large
    /// enough to be split over threads.
    #[test]
    fn fused_cpu_pass_matches_the_tensor_path() {
        for (rows, cols) in [(6i64, 5i64), (300, 300)] {
            let mut rng = crate::rng::AgentRng::new(3);
            let w0 = rng.normal(&[rows, cols], Device::Cpu);
            let t0 = rng.normal(&[rows, cols], Device::Cpu);
            let (mut fused, mut fused_t) = (ParamSet::new(), ParamSet::new());
            let a = fused.add("w", w0.copy(), Device::Cpu);
            let ta = fused_t.add("w", t0.copy(), Device::Cpu);
            // The same values seen through a transpose: not contiguous, so the tensor path runs.
            let (mut plain, mut plain_t) = (ParamSet::new(), ParamSet::new());
            let b = plain.add("w", w0.t_copy().contiguous().t_(), Device::Cpu);
            let tb = plain_t.add("w", t0.t_copy().contiguous().t_(), Device::Cpu);
            assert!(!b.is_contiguous() && !tb.is_contiguous());
            let (mut oa, mut ob) = (Adam::new(&fused, 0.01), Adam::new(&plain, 0.01));
            // Moments zeroed like the parameter's layout, so the plain optimizer's are transposed too.
            ob.m = vec![Tensor::zeros([cols, rows], (Kind::Float, Device::Cpu)).t_()];
            ob.v = vec![Tensor::zeros([cols, rows], (Kind::Float, Device::Cpu)).t_()];
            for _ in 0..5 {
                let g = rng.normal(&[rows, cols], Device::Cpu);
                oa.apply_and_track(&fused, &[g.copy()], &fused_t, 0.005);
                ob.apply_and_track(&plain, &[g.t_copy().contiguous().t_()], &plain_t, 0.005);
            }
            let diff = (&a - &b).abs().max().double_value(&[]);
            assert!(diff < 1e-6, "fused and tensor Adam differ by {diff} ({rows}×{cols})");
            assert!((&a - &w0).abs().max().double_value(&[]) > 1e-3, "the weights moved");
            let diff = (&ta - &tb).abs().max().double_value(&[]);
            assert!(diff < 1e-6, "fused and tensor Polyak targets differ by {diff} ({rows}×{cols})");
            assert!((&ta - &t0).abs().max().double_value(&[]) > 1e-3, "the target moved");
        }
    }

    /// A set of tensors stepped together (its elements cut into one range per thread across the
    /// tensors' boundaries) gives the same bits as each tensor stepped alone, target included.
    #[test]
    fn one_region_over_many_tensors_equals_one_step_per_tensor() {
        let shapes: [&[i64]; 5] = [&[3, 23, 256], &[7], &[300, 211], &[1], &[50, 40]];
        let mut rng = crate::rng::AgentRng::new(11);
        let inits: Vec<(Tensor, Tensor)> =
            shapes.iter().map(|s| (rng.normal(s, Device::Cpu), rng.normal(s, Device::Cpu))).collect();
        let (mut all, mut all_t) = (ParamSet::new(), ParamSet::new());
        for (i, (w, t)) in inits.iter().enumerate() {
            let _ = all.add(&format!("w{i}"), w.copy(), Device::Cpu);
            let _ = all_t.add(&format!("w{i}"), t.copy(), Device::Cpu);
        }
        let mut joint = Adam::new(&all, 0.01);
        let mut alone: Vec<(ParamSet, ParamSet, Adam)> = inits
            .iter()
            .map(|(w, t)| {
                let (mut p, mut pt) = (ParamSet::new(), ParamSet::new());
                let _ = p.add("w", w.copy(), Device::Cpu);
                let _ = pt.add("w", t.copy(), Device::Cpu);
                let opt = Adam::new(&p, 0.01);
                (p, pt, opt)
            })
            .collect();
        for _ in 0..3 {
            let grads: Vec<Tensor> = shapes.iter().map(|s| rng.normal(s, Device::Cpu)).collect();
            joint.apply_and_track(&all, &grads.iter().map(|g| g.copy()).collect::<Vec<_>>(), &all_t, 0.005);
            for ((p, pt, opt), g) in alone.iter_mut().zip(&grads) {
                opt.apply_and_track(p, &[g.copy()], pt, 0.005);
            }
        }
        for (i, (p, pt, _)) in alone.iter().enumerate() {
            assert!(all.named()[i].1.equal(&p.named()[0].1), "weights of tensor {i}");
            assert!(all_t.named()[i].1.equal(&pt.named()[0].1), "target of tensor {i}");
            assert!(!p.named()[0].1.equal(&inits[i].0), "tensor {i} moved");
        }
    }

    #[test]
    fn minimizes_a_quadratic() {
        let mut p = ParamSet::new();
        let x = p.add("x", Tensor::from_slice(&[3.0f32, -2.0]), Device::Cpu);
        let mut adam = Adam::new(&p, 0.05);
        for _ in 0..500 {
            let loss = (&x - 1.0).square().sum(Kind::Float);
            adam.minimize(&p, &loss);
        }
        assert!((&x - 1.0).abs().max().double_value(&[]) < 1e-2);
    }
}
