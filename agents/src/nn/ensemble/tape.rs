//! The critic ensemble's forward and backward passes written out, for the updates on CPU.
//!
//! Autograd runs each elementwise step of a layer (bias, LayerNorm, gain, shift, ReLU, and
//! each of their backward steps) as its own pass over the `[E, rows, width]` activations; at
//! batch 256 those passes cost about as much as the matmuls. Here each hidden layer is one
//! matmul (MKL, through libtorch) and one fused pass over its rows ([`super::kernels`]), with
//! the one-output head folded into the last pass; the backward pass is one fused pass per layer
//! and its two matmuls, `∂W = xᵀ g_z` and `∂x = g_z Wᵀ`.
//!
//! The pass applies to a one-output ensemble without dropout on float32 CPU tensors
//! ([`EnsembleMlp::tape_applies`]); everything else takes the autograd path, which is the
//! reference: tests check that values and gradients agree.

use super::kernels::{self, Dims, FirstLayer, Forward, GradIn, HeadForward, NormBackward, NormForward};
use super::EnsembleMlp;
use crate::nn::floats::{floats as slice, floats_mut as slice_mut};
use crate::nn::{gemm, path};
use tch::{Device, Kind, Tensor};

/// What the first layer saw.
enum Input {
    /// `[B, in]`, shared by every member.
    Shared(Tensor),
    /// `[B, o]` states and `[B·k, a]` actions, k per state ([`EnsembleMlp::forward_paired`]).
    Paired { obs: Tensor, act: Tensor },
}

/// One hidden layer's saved values.
struct Hidden {
    /// `z + b` before LayerNorm (`None` without it).
    z: Option<Tensor>,
    /// `(μ, ρ)` per row, `[E, R, 2]` (LayerNorm only).
    stats: Option<Tensor>,
    /// The layer's output `h`, `[E, R, W]`.
    h: Tensor,
}

/// A forward pass's saved activations, consumed by [`EnsembleMlp::backward_params`].
pub struct EnsembleTape {
    input: Input,
    hidden: Vec<Hidden>,
}

fn empty(shape: &[i64]) -> Tensor {
    Tensor::empty(shape, (Kind::Float, Device::Cpu))
}

fn zeros(shape: &[i64]) -> Tensor {
    Tensor::zeros(shape, (Kind::Float, Device::Cpu))
}

impl EnsembleMlp {
    /// Whether the taped pass applies to input `x`: float32 CPU tensors, a one-output head,
    /// ReLU hidden layers and no dropout, and the generic path not forced
    /// ([`crate::nn::path`]).
    pub fn tape_applies(&self, x: &Tensor) -> bool {
        self.head_width() == 1 && self.tape_applies_any_head(x)
    }

    /// [`EnsembleMlp::tape_applies`] for a head of any width (a single network's taped pass,
    /// [`crate::nn::mlp_pass`]: an actor's `[μ, log σ]` head).
    pub(crate) fn tape_applies_any_head(&self, x: &Tensor) -> bool {
        let head = &self.layers[self.layers.len() - 1];
        let taped = self.dropout == 0.0
            && self.activation.is_relu()
            && self.layers.len() >= 2
            && path::fast_cpu(&head.weight)
            && path::fast_cpu(x);
        if taped {
            path::hit();
        }
        taped
    }

    /// The head's output width.
    fn head_width(&self) -> i64 {
        self.layers[self.layers.len() - 1].weight.size()[2]
    }

    /// All members on `x` `[B, in]` → `[E, B]` without gradients or tape (the target's and the
    /// actor's no-gradient passes); `idx` picks members (repeats allowed) as
    /// [`EnsembleMlp::forward_subset`] does.
    pub fn forward_fused(&self, x: &Tensor, idx: Option<&Tensor>) -> Tensor {
        self.run_taped(Input::Shared(x.detach()), idx, false).0
    }

    /// All members on `x` `[B, in]` → `Q` `[E, B]` (no gradient graph) and the tape for
    /// [`EnsembleMlp::backward_params`]. With a head wider than one output (allowed by
    /// [`EnsembleMlp::tape_applies_any_head`]) the output is `[E, B, out]`: the last hidden
    /// layer's fused pass leaves `h`, and the head is one batched matmul `b + h W`.
    pub fn forward_taped(&self, x: &Tensor) -> (Tensor, EnsembleTape) {
        let (q, tape) = self.run_taped(Input::Shared(x.detach()), None, true);
        (q, tape.expect("kept"))
    }

    /// [`EnsembleMlp::forward_paired`] taped: `obs` `[B, o]`, `act` `[B·k, a]` → `[E, B·k]`.
    pub fn forward_paired_taped(&self, obs: &Tensor, act: &Tensor) -> (Tensor, EnsembleTape) {
        let (q, tape) = self.run_taped(
            Input::Paired { obs: obs.detach().contiguous(), act: act.detach().contiguous() },
            None,
            true,
        );
        (q, tape.expect("kept"))
    }

    fn run_taped(&self, input: Input, idx: Option<&Tensor>, keep: bool) -> (Tensor, Option<EnsembleTape>) {
        tch::no_grad(|| {
            let pick = |t: &Tensor| match idx {
                Some(i) => t.index_select(0, i),
                None => t.shallow_clone(),
            };
            let e = idx.map_or(self.members, |i| i.size()[0]);
            let picked: Option<Vec<usize>> = idx.map(|i| {
                Vec::<i64>::try_from(i.to_kind(Kind::Int64))
                    .expect("member indices")
                    .into_iter()
                    .map(|m| m as usize)
                    .collect()
            });
            let last = self.layers.len() - 1;
            let mut hidden: Vec<Hidden> = Vec::with_capacity(last);
            let mut q = Tensor::new();
            for (i, layer) in self.layers.iter().enumerate().take(last) {
                let width = layer.weight.size()[2];
                // z = x W (the bias is added in the fused pass; a shared first layer's x W is
                // computed there too, from `first`: the input and the picked members' weights).
                // The gemm kernels read picked members in place; libtorch's `bmm` needs them
                // copied out.
                let mut first = None;
                let (z, per_state, k) = match (&input, hidden.last()) {
                    (_, Some(prev)) => (
                        gemm::bmm(&prev.h, &layer.weight, picked.as_deref())
                            .unwrap_or_else(|| prev.h.bmm(&pick(&layer.weight))),
                        None,
                        1,
                    ),
                    (Input::Shared(x), None) => {
                        first = Some((x.contiguous(), pick(&layer.weight).contiguous()));
                        (empty(&[e, x.size()[0], width]), None, 1)
                    }
                    (Input::Paired { obs, act }, None) => {
                        let weight = pick(&layer.weight);
                        let (b, o, rows, a) = (obs.size()[0], obs.size()[1], act.size()[0], act.size()[1]);
                        let per_state = obs.unsqueeze(0).expand([e, b, o], false).bmm(&weight.narrow(1, 0, o));
                        let z = act.unsqueeze(0).expand([e, rows, a], false).bmm(&weight.narrow(1, o, a));
                        (z, Some(per_state), (rows / b) as usize)
                    }
                };
                let rows = z.size()[1];
                let dims = Dims { members: e as usize, rows: rows as usize, width: width as usize };
                let bias = pick(&layer.bias).contiguous();
                let norm = layer.norm.as_ref().map(|(g, s)| {
                    (pick(g).contiguous(), pick(s).contiguous(), empty(&[e, rows, 2]), empty(&[e, rows, width]))
                });
                let head = (i + 1 == last && self.head_width() == 1).then(|| {
                    let h = &self.layers[last];
                    (pick(&h.weight).contiguous(), pick(&h.bias).contiguous(), empty(&[e, rows]))
                });
                // SAFETY: every tensor here is a fresh or contiguous float32 CPU tensor of the
                // shape `Dims` says, the mutable ones (z, stats, out, q) are fresh and distinct,
                // and the slices end with this statement.
                unsafe {
                    kernels::forward(
                        Forward {
                            dims,
                            z: slice_mut(&z),
                            first: first.as_ref().map(|(x, weight)| FirstLayer {
                                x: slice(x),
                                weight: slice(weight),
                                d: x.size()[1] as usize,
                            }),
                            bias: slice(&bias),
                            per_state: per_state.as_ref().map(|p| (slice(p), k)),
                            norm: norm.as_ref().map(|(g, s, st, out)| NormForward {
                                gain: slice(g),
                                shift: slice(s),
                                stats: slice_mut(st),
                                out: slice_mut(out),
                            }),
                            head: head.as_ref().map(|(w, c, q)| HeadForward {
                                weight: slice(w),
                                bias: slice(c),
                                q: slice_mut(q),
                            }),
                        },
                        crate::nn::team::threads(),
                    );
                }
                if let Some((_, _, qt)) = head {
                    q = qt;
                }
                hidden.push(match norm {
                    Some((_, _, stats, out)) => Hidden { z: Some(z), stats: Some(stats), h: out },
                    None => Hidden { z: None, stats: None, h: z },
                });
                if !keep && hidden.len() > 1 {
                    hidden.remove(0);
                }
            }
            if self.head_width() > 1 {
                // A wide head: out = b + h W, one batched matmul.
                let h = &self.layers[last];
                q = pick(&h.bias).baddbmm(&hidden.last().expect("a hidden layer").h, &pick(&h.weight), 1.0, 1.0);
            }
            (q, keep.then_some(EnsembleTape { input, hidden }))
        })
    }

    /// Gradients of `Σ_{e,r} ∂q[e, r] · Q_e(row r)` over the ensemble's parameters, in
    /// registration order (`l0/weight`, `l0/bias`, `ln0/weight`, `ln0/bias`, …, `head/weight`,
    /// `head/bias`), from the tape of a taped forward pass over all members.
    pub fn backward_params(&self, tape: EnsembleTape, grad_q: &Tensor) -> Vec<Tensor> {
        self.backward(tape, grad_q, true).0
    }

    /// The parameter gradients (as [`EnsembleMlp::backward_params`]) of a scalar `loss` that
    /// depends on the ensemble only through `q`, the output of [`EnsembleMlp::forward_taped`]
    /// made a leaf with `set_requires_grad(true)`: `loss` is differentiated in `q` alone, then
    /// carried through the networks by the tape.
    pub fn backward_loss(&self, tape: EnsembleTape, loss: &Tensor, q: &Tensor) -> Vec<Tensor> {
        let dq = Tensor::run_backward(&[loss], &[q], false, false).pop().expect("one gradient");
        self.backward_params(tape, &dq)
    }

    /// The gradient of `Σ_{e,r} ∂q[e, r] · Q_e(x_r)` in the shared input `x` `[B, in]` (the
    /// actor's `∂Q/∂a`), from the tape of [`EnsembleMlp::forward_taped`]; no weight gradients
    /// are formed.
    pub fn backward_input(&self, tape: EnsembleTape, grad_q: &Tensor) -> Tensor {
        self.backward(tape, grad_q, false).1.expect("a shared input's gradient")
    }

    /// The gradient in the shared input `x` `[B, in]` of `c · Σ_r Q_{m(r)}(x_r)`, one member
    /// `m(r)` per row (the actor's min over the ensemble: the argmin, `c = 1/B`), from the tape
    /// of [`EnsembleMlp::forward_taped`]. It costs about one member's backward pass, not `E`:
    /// the rows are sorted by member into slots, so each member's rows are one contiguous
    /// range; each member's fused pass runs on its range (the members split over threads by
    /// their number of rows), and each layer's `∂h = g_z W_mᵀ` runs as one ragged batched
    /// matmul over the members' ranges (MKL's grouped call, [`crate::nn::mkl`]; where it is
    /// absent, one matmul per member).
    pub fn backward_input_one_member(&self, tape: EnsembleTape, member: &Tensor, c: f64) -> Tensor {
        tch::no_grad(|| {
            let EnsembleTape { input, hidden } = tape;
            let Input::Shared(x) = &input else { panic!("backward_input_one_member needs a shared input") };
            let (e, b) = (self.members as usize, x.size()[0] as usize);
            let last = self.layers.len() - 1;
            let ids: Vec<usize> = Vec::<i64>::try_from(member.to_kind(Kind::Int64))
                .expect("member ids")
                .into_iter()
                .map(|m| m as usize)
                .collect();
            let mut count = vec![0usize; e];
            ids.iter().for_each(|&m| count[m] += 1);
            // Member m's slots: [start[m], start[m] + count[m]).
            let start: Vec<usize> = count
                .iter()
                .scan(0, |acc, &n| {
                    let s = *acc;
                    *acc += n;
                    Some(s)
                })
                .collect();
            // The source row (flat index m·B + r) of each slot and each row's slot.
            let (mut source, mut position, mut next) = (vec![0usize; b], vec![0i64; b], start.clone());
            for (r, &m) in ids.iter().enumerate() {
                position[r] = next[m] as i64;
                source[next[m]] = m * b + r;
                next[m] += 1;
            }
            let members: Vec<usize> = (0..e).filter(|&m| count[m] > 0).collect();
            // Consecutive members per thread, about B / threads rows each.
            let threads = crate::nn::team::threads().min(members.len()).max(1);
            let mut groups: Vec<Vec<usize>> = vec![Vec::new(); threads];
            for &m in &members {
                let g = (start[m] * threads / b.max(1)).min(threads - 1);
                groups[g].push(m);
            }
            groups.retain(|g| !g.is_empty());
            let grad_q = vec![c as f32; b];
            let head_w = self.layers[last].weight.contiguous();
            let mut grad_h: Option<Tensor> = None;
            for i in (0..last).rev() {
                let layer = &self.layers[i];
                let hid = &hidden[i];
                let w = hid.h.size()[2] as usize;
                // The tape's rows are read in place, through `source`.
                let norm = match (&layer.norm, &hid.z, &hid.stats) {
                    (Some((g, _)), Some(z), Some(st)) => Some((z, st, g.contiguous())),
                    _ => None,
                };
                let top = grad_h.is_none();
                let gz = grad_h.take().unwrap_or_else(|| empty(&[b as i64, w as i64]));
                // SAFETY: contiguous float32 CPU tensors (the tape's, the layer's parameters
                // and fresh buffers); `gz` is written through one slice, cut into disjoint
                // per-thread ranges; the slices end with this block.
                unsafe {
                    let (h, head_w) = (slice(&hid.h), slice(&head_w));
                    let norm = norm.as_ref().map(|(z, st, g)| (slice(z), slice(st), slice(g)));
                    let mut rest = slice_mut(&gz);
                    let mut pieces = Vec::with_capacity(groups.len());
                    for group in &groups {
                        let rows: usize = group.iter().map(|&m| count[m]).sum();
                        let (piece, tail) = rest.split_at_mut(rows * w);
                        rest = tail;
                        pieces.push((group, piece));
                    }
                    // One member's pass on its own slots; the parameter gradients the kernel
                    // accumulates are not wanted (scratch).
                    let pass = |(group, mut g): (&Vec<usize>, &mut [f32])| {
                        let mut scratch = vec![0f32; 4 * w + 1];
                        for &m in group {
                            let (s0, s1) = (start[m], start[m] + count[m]);
                            let (mine, tail) = g.split_at_mut((s1 - s0) * w);
                            g = tail;
                            let (s_bias, rest) = scratch.split_at_mut(w);
                            let (s_gain, rest) = rest.split_at_mut(w);
                            let (s_shift, rest) = rest.split_at_mut(w);
                            let (s_head_w, s_head_b) = rest.split_at_mut(w);
                            let grad = if top {
                                GradIn::Head {
                                    grad_q: &grad_q[s0..s1],
                                    weight: &head_w[m * w..][..w],
                                    out: mine,
                                    grad_weight: s_head_w,
                                    grad_bias: s_head_b,
                                }
                            } else {
                                GradIn::InPlace(mine)
                            };
                            kernels::backward(
                                kernels::Backward {
                                    dims: Dims { members: 1, rows: s1 - s0, width: w },
                                    grad,
                                    h,
                                    norm: norm.map(|(z, st, g)| NormBackward {
                                        z,
                                        stats: st,
                                        gain: &g[m * w..][..w],
                                        grad_gain: s_gain,
                                        grad_shift: s_shift,
                                    }),
                                    rows_from: Some(&source[s0..s1]),
                                    grad_bias: s_bias,
                                    per_state: None,
                                },
                                1,
                            );
                        }
                    };
                    crate::nn::team::run(pieces, pass);
                }
                // ∂h of the layer below (∂x below the first), each member's slots through its
                // own weights: ∂h[slots of m] = g_z[slots of m] W_mᵀ.
                let below = layer.weight.size()[1] as usize;
                let out = empty(&[b as i64, below as i64]);
                let weight = layer.weight.contiguous();
                // SAFETY: contiguous float32 CPU tensors; `out` is fresh and cut into disjoint
                // per-member ranges; the slices end with this block.
                let done = unsafe {
                    let (gz_s, weight_s) = (slice(&gz), slice(&weight));
                    let mut rest = slice_mut(&out);
                    let mut products = Vec::with_capacity(members.len());
                    for &m in &members {
                        let (c, tail) = rest.split_at_mut(count[m] * below);
                        rest = tail;
                        products.push(crate::nn::mkl::Product {
                            a: &gz_s[start[m] * w..][..count[m] * w],
                            b: &weight_s[m * below * w..][..below * w],
                            c,
                            m: count[m],
                            n: below,
                            k: w,
                            transpose_b: true,
                        });
                    }
                    crate::nn::mkl::ragged_matmul(products)
                };
                if !done {
                    for &m in &members {
                        let (s0, n) = (start[m] as i64, count[m] as i64);
                        let _ = gz.narrow(0, s0, n).mm_out(&out.narrow(0, s0, n), &layer.weight.get(m as i64).tr());
                    }
                }
                grad_h = Some(out);
            }
            let slotted = grad_h.expect("at least one hidden layer");
            slotted.index_select(0, &Tensor::from_slice(&position))
        })
    }

    /// Both backward passes: parameter gradients (if `params`, else empty) and, for a shared
    /// input, the input's gradient (only when `params` is false).
    fn backward(&self, tape: EnsembleTape, grad_q: &Tensor, params: bool) -> (Vec<Tensor>, Option<Tensor>) {
        tch::no_grad(|| {
            let EnsembleTape { input, hidden } = tape;
            let e = self.members;
            let last = self.layers.len() - 1;
            let grad_q = grad_q.detach().to_kind(Kind::Float).contiguous();
            // Per layer: [∂W, ∂b, (∂γ, ∂β)], filled from the head down.
            let mut per_layer: Vec<Vec<Tensor>> = (0..self.layers.len()).map(|_| Vec::new()).collect();
            let head_w = self.layers[last].weight.contiguous();
            let width_last = head_w.size()[1];
            let (mut grad_head_w, mut grad_head_b) = (zeros(&[e, width_last, 1]), zeros(&[e, 1, 1]));
            let mut grad_h: Option<Tensor> = None;
            if self.head_width() > 1 {
                // A wide head (grad_q `[E, R, out]`): ∂W = hᵀ g, ∂b = Σ_r g, ∂h = g Wᵀ; the
                // layers below then take ∂h in place.
                let h = &hidden[last - 1].h;
                grad_head_w = h.transpose(1, 2).bmm(&grad_q);
                grad_head_b = grad_q.sum_dim_intlist(&[1i64][..], true, Kind::Float);
                grad_h = Some(grad_q.bmm(&head_w.transpose(1, 2)));
            }
            let mut input_grad = None;
            for i in (0..last).rev() {
                let layer = &self.layers[i];
                let hid = &hidden[i];
                let (rows, width) = (hid.h.size()[1], hid.h.size()[2]);
                let dims = Dims { members: e as usize, rows: rows as usize, width: width as usize };
                let grad_bias = zeros(&[e, 1, width]);
                let norm_grads =
                    layer.norm.as_ref().map(|(g, _)| (g.contiguous(), zeros(&[e, 1, width]), zeros(&[e, 1, width])));
                let paired_k = match &input {
                    Input::Paired { obs, .. } if i == 0 => Some(rows / obs.size()[0]),
                    _ => None,
                };
                let per_state = paired_k.map(|k| zeros(&[e, rows / k, width]));
                let gz = match &grad_h {
                    Some(g) => g.shallow_clone(),
                    None => empty(&[e, rows, width]),
                };
                // SAFETY: contiguous float32 CPU tensors of the sizes `Dims` says; the written
                // ones (gz, grad_bias, the norm and head accumulators, per_state) are distinct
                // from each other and from the ones read; the slices end with this statement.
                unsafe {
                    let grad = match &grad_h {
                        Some(_) => GradIn::InPlace(slice_mut(&gz)),
                        None => GradIn::Head {
                            grad_q: slice(&grad_q),
                            weight: slice(&head_w),
                            out: slice_mut(&gz),
                            grad_weight: slice_mut(&grad_head_w),
                            grad_bias: slice_mut(&grad_head_b),
                        },
                    };
                    kernels::backward(
                        kernels::Backward {
                            dims,
                            grad,
                            h: slice(&hid.h),
                            norm: match (&norm_grads, &hid.z, &hid.stats) {
                                (Some((g, gg, gs)), Some(z), Some(st)) => Some(NormBackward {
                                    z: slice(z),
                                    stats: slice(st),
                                    gain: slice(g),
                                    grad_gain: slice_mut(gg),
                                    grad_shift: slice_mut(gs),
                                }),
                                _ => None,
                            },
                            rows_from: None,
                            grad_bias: slice_mut(&grad_bias),
                            per_state: per_state.as_ref().zip(paired_k).map(|(p, k)| (slice_mut(p), k as usize)),
                        },
                        crate::nn::team::threads(),
                    );
                }
                // ∂W = xᵀ g_z, with x the layer's input.
                let grad_w = if !params {
                    Tensor::new()
                } else if i > 0 {
                    let h = &hidden[i - 1].h;
                    gemm::bmm_at(h, &gz).unwrap_or_else(|| h.transpose(1, 2).bmm(&gz))
                } else {
                    match &input {
                        Input::Shared(x) => {
                            let (b, d) = (x.size()[0], x.size()[1]);
                            gemm::bmm_at(x, &gz)
                                .unwrap_or_else(|| x.tr().unsqueeze(0).expand([e, d, b], false).bmm(&gz))
                        }
                        Input::Paired { obs, act } => {
                            let (b, o, a) = (obs.size()[0], obs.size()[1], act.size()[1]);
                            let ps = per_state.as_ref().expect("paired");
                            let gs = obs.tr().unsqueeze(0).expand([e, o, b], false).bmm(ps);
                            let ga = act.tr().unsqueeze(0).expand([e, a, rows], false).bmm(&gz);
                            Tensor::cat(&[gs, ga], 1)
                        }
                    }
                };
                // ∂h of the layer below = g_z Wᵀ; below the first layer, ∂x = Σ_e g_z,e W_eᵀ.
                if i == 0 && !params {
                    if let Input::Shared(_) = &input {
                        input_grad = Some(gz.bmm(&layer.weight.transpose(1, 2)).sum_dim_intlist(
                            &[0i64][..],
                            false,
                            Kind::Float,
                        ));
                    }
                }
                grad_h = (i > 0)
                    .then(|| gemm::bmm_bt(&gz, &layer.weight).unwrap_or_else(|| gz.bmm(&layer.weight.transpose(1, 2))));
                let mut grads = vec![grad_w, grad_bias];
                if let Some((_, gg, gs)) = norm_grads {
                    grads.push(gg);
                    grads.push(gs);
                }
                per_layer[i] = grads;
            }
            if !params {
                return (Vec::new(), input_grad);
            }
            per_layer[last] = vec![grad_head_w, grad_head_b];
            (per_layer.into_iter().flatten().collect(), None)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::{MlpConfig, ParamSet};
    use crate::rng::AgentRng;

    fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
        (a - b).abs().max().double_value(&[])
    }

    /// Values and every gradient of the taped pass equal autograd's, with and without
    /// LayerNorm, for shared inputs (parameters, the input, one member per row), paired inputs
    /// (k = 3) and a member subset; small enough for one thread, and large enough that the
    /// passes are split over libtorch's team where it has two threads or more.
    #[test]
    fn taped_pass_matches_autograd() {
        for (layer_norm, width, rows) in [(false, 19, 7), (true, 19, 7), (false, 64, 200), (true, 64, 200)] {
            let cfg = MlpConfig { hidden: vec![width, 13], layer_norm, ..MlpConfig::default() };
            let mut p = ParamSet::new();
            let mut rng = AgentRng::new(11);
            let ens = EnsembleMlp::new(&mut p, "critic", 3, 5, 1, &cfg, 1.0, &mut rng, Device::Cpu);
            super::super::tests::perturb_norms_and_biases(&p, &mut rng);
            let params = p.tensors();
            let x = rng.normal(&[rows, 5], Device::Cpu);
            let dq = rng.normal(&[3, rows], Device::Cpu);
            let check = |got_q: &Tensor, want_q: &Tensor, got: Vec<Tensor>, what: &str| {
                assert!(
                    max_diff(got_q, &want_q.detach()) < 1e-5,
                    "{what} values, layer_norm {layer_norm}, rows {rows}"
                );
                let loss = (want_q * &dq).sum(Kind::Float);
                let want = Tensor::run_backward(&[&loss], &params.iter().collect::<Vec<_>>(), false, false);
                assert_eq!(got.len(), want.len());
                for ((g, w), (name, _)) in got.iter().zip(&want).zip(p.named()) {
                    assert_eq!(g.size(), w.size(), "{what} {name}");
                    assert!(
                        max_diff(g, w) < 1e-4 * (1.0 + w.abs().max().double_value(&[])),
                        "{what} {name}, layer_norm {layer_norm}, rows {rows}: {}",
                        max_diff(g, w)
                    );
                }
            };
            assert!(ens.tape_applies(&x));
            let (q, tape) = ens.forward_taped(&x);
            check(&q, &ens.forward(&x, None).squeeze_dim(-1), ens.backward_params(tape, &dq), "shared");
            let dq_shared = dq.shallow_clone();
            let (obs, act) = (x.narrow(1, 0, 3), rng.normal(&[3 * rows, 2], Device::Cpu));
            let dq = rng.normal(&[3, 3 * rows], Device::Cpu);
            let (q, tape) = ens.forward_paired_taped(&obs, &act);
            let want = ens.forward_paired(&obs, &act, None).squeeze_dim(-1);
            let loss = (&want * &dq).sum(Kind::Float);
            let want_g = Tensor::run_backward(&[&loss], &params.iter().collect::<Vec<_>>(), false, false);
            assert!(max_diff(&q, &want.detach()) < 1e-5, "paired values");
            for ((g, w), (name, _)) in ens.backward_params(tape, &dq).iter().zip(&want_g).zip(p.named()) {
                assert!(
                    max_diff(g, w) < 1e-4 * (1.0 + w.abs().max().double_value(&[])),
                    "paired {name}, layer_norm {layer_norm}, rows {rows}: {}",
                    max_diff(g, w)
                );
            }
            // The input's gradient (the actor's ∂Q/∂a).
            let xg = x.detach().set_requires_grad(true);
            let loss = (ens.forward(&xg, None).squeeze_dim(-1) * &dq_shared).sum(Kind::Float);
            let want = Tensor::run_backward(&[&loss], &[&xg], false, false);
            let (_, tape) = ens.forward_taped(&x);
            let got = ens.backward_input(tape, &dq_shared);
            assert!(
                max_diff(&got, &want[0]) < 1e-4 * (1.0 + want[0].abs().max().double_value(&[])),
                "input gradient, layer_norm {layer_norm}, rows {rows}"
            );
            // One member per row (the actor's min): against autograd on the min.
            let (q, tape) = ens.forward_taped(&x);
            let (_, arg) = q.min_dim(0, false);
            let got = ens.backward_input_one_member(tape, &arg, 1.0 / rows as f64);
            let xg = x.detach().set_requires_grad(true);
            let loss = ens.forward(&xg, None).squeeze_dim(-1).amin(0, false).mean(Kind::Float);
            let want = Tensor::run_backward(&[&loss], &[&xg], false, false);
            assert!(
                max_diff(&got, &want[0]) < 1e-5 * (1.0 + want[0].abs().max().double_value(&[])),
                "one member per row, layer_norm {layer_norm}, rows {rows}: {}",
                max_diff(&got, &want[0])
            );
            // Members spread evenly (the batched, padded layout) and all on one (one at a time).
            for member in [
                Tensor::arange(rows, (Kind::Int64, Device::Cpu)).remainder(3),
                Tensor::ones([rows], (Kind::Int64, Device::Cpu)),
            ] {
                let (_, tape) = ens.forward_taped(&x);
                let got = ens.backward_input_one_member(tape, &member, 0.5);
                let picked = ens.forward(&xg, None).squeeze_dim(-1).gather(0, &member.unsqueeze(0), false);
                let want = Tensor::run_backward(&[&(picked.sum(Kind::Float) * 0.5)], &[&xg], false, false);
                assert!(
                    max_diff(&got, &want[0]) < 1e-5 * (1.0 + want[0].abs().max().double_value(&[])),
                    "given members, layer_norm {layer_norm}, rows {rows}"
                );
            }
            let idx = Tensor::from_slice(&[2i64, 0, 2]);
            let sub = ens.forward_fused(&x, Some(&idx));
            assert!(max_diff(&sub, &ens.forward_subset(&x, &idx).squeeze_dim(-1).detach()) < 1e-5, "subset");
            assert!(!sub.requires_grad());
        }
    }
}
