//! A batched ensemble of `E` MLPs (the critic of SAC, REDQ, RLPD and WSRL).
//!
//! Every layer's weights are one tensor `W: [E, in, out]` with bias `b: [E, 1, out]`, and the
//! forward pass is one `baddbmm` per layer (a product and a row sum for a one-output head),
//! `h_e = b_e + x_e W_e` for all members at once —
//! never a loop over networks, so an ensemble of 10 costs one larger matmul per layer instead
//! of 10 small ones. LayerNorm (per member, gain and bias `[E, 1, out]`) and dropout follow
//! the layer order of [`super::mlp`]. Input `[B, in]` (shared by all members) or `[E, B, in]`;
//! output `[E, B, out]`. Two cheaper forms for the critic's uses: [`EnsembleMlp::forward_min`]
//! (the min over members, differentiated through each row's minimizer only) and
//! [`EnsembleMlp::forward_paired`] (k actions per state without repeating the states).

mod fit;
mod kernels;
mod tape;

pub use tape::EnsembleTape;

use super::{init::dense, mlp::dropout, mlp::Activation, MlpConfig, ParamSet};
use crate::rng::AgentRng;
use tch::{Device, Kind, Tensor};

#[derive(Debug)]
struct Layer {
    weight: Tensor,
    bias: Tensor,
    norm: Option<(Tensor, Tensor)>,
}

/// `E` MLPs evaluated as one.
#[derive(Debug)]
pub struct EnsembleMlp {
    layers: Vec<Layer>,
    members: i64,
    dropout: f64,
    activation: Activation,
}

impl EnsembleMlp {
    /// `members` MLPs `in_dim → cfg.hidden… → out_dim`, each initialized like [`super::Mlp`]
    /// (orthogonal per member), registered under `prefix` as `{prefix}/l{i}/weight` etc.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        params: &mut ParamSet,
        prefix: &str,
        members: i64,
        in_dim: i64,
        out_dim: i64,
        cfg: &MlpConfig,
        head_gain: f64,
        rng: &mut AgentRng,
        device: Device,
    ) -> Self {
        let mut dims = vec![in_dim];
        dims.extend(&cfg.hidden);
        dims.push(out_dim);
        let n = dims.len() - 1;
        let mut layers = Vec::new();
        for i in 0..n {
            let (fi, fo) = (dims[i], dims[i + 1]);
            let head = i + 1 == n;
            let gain = if head { head_gain } else { 2f64.sqrt() };
            let (w, b): (Vec<Tensor>, Vec<Tensor>) = (0..members).map(|_| dense(rng, fi, fo, gain, cfg.init)).unzip();
            let name = if head { format!("{prefix}/head") } else { format!("{prefix}/l{i}") };
            let weight = params.add(format!("{name}/weight"), Tensor::stack(&w, 0), device);
            let bias = params.add(format!("{name}/bias"), Tensor::stack(&b, 0).unsqueeze(1), device);
            let norm = (!head && cfg.layer_norm).then(|| {
                let g = params.add(
                    format!("{prefix}/ln{i}/weight"),
                    Tensor::ones([members, 1, fo], (Kind::Float, Device::Cpu)),
                    device,
                );
                let b = params.add(
                    format!("{prefix}/ln{i}/bias"),
                    Tensor::zeros([members, 1, fo], (Kind::Float, Device::Cpu)),
                    device,
                );
                (g, b)
            });
            layers.push(Layer { weight, bias, norm });
        }
        Self { layers, members, dropout: cfg.dropout, activation: cfg.activation }
    }

    /// `mlp` seen as a one-member ensemble: every tensor a view of the MLP's own (`W` `[in, out]`
    /// as `[1, in, out]`, `b` `[out]` as `[1, 1, out]`), so the taped pass runs on the MLP's
    /// weights and an optimizer step on the MLP is seen here ([`crate::nn::mlp_pass`]).
    pub(crate) fn of_mlp(mlp: &super::Mlp) -> Self {
        let (dense, norms, dropout, activation) = mlp.parts();
        let row = |t: &Tensor| t.view([1, 1, -1]);
        let layers = tch::no_grad(|| {
            dense
                .iter()
                .enumerate()
                .map(|(i, d)| Layer {
                    weight: d.weight.unsqueeze(0),
                    bias: row(&d.bias),
                    norm: norms.get(i).filter(|_| i + 1 < dense.len()).map(|(g, b)| (row(g), row(b))),
                })
                .collect()
        });
        Self { layers, members: 1, dropout, activation }
    }

    /// A handle on the same tensors (shared storage: in-place updates such as Polyak steps are
    /// seen by both), e.g. for a closure that evaluates the target critic.
    pub fn shallow(&self) -> Self {
        let layers = self
            .layers
            .iter()
            .map(|l| Layer {
                weight: l.weight.shallow_clone(),
                bias: l.bias.shallow_clone(),
                norm: l.norm.as_ref().map(|(g, b)| (g.shallow_clone(), b.shallow_clone())),
            })
            .collect();
        Self { layers, members: self.members, dropout: self.dropout, activation: self.activation }
    }

    /// Each layer's `(W, b)` (`[E, in, out]`, `[E, 1, out]`), the head last, when the ensemble
    /// is plain dense layers with SiLU between them (no LayerNorm, no dropout): what a hand-written
    /// pass over its layers needs (the dynamics ensemble's fused training step).
    pub(crate) fn silu_layers(&self) -> Option<Vec<(&Tensor, &Tensor)>> {
        let plain =
            self.activation == Activation::Silu && self.dropout == 0.0 && self.layers.iter().all(|l| l.norm.is_none());
        plain.then(|| self.layers.iter().map(|l| (&l.weight, &l.bias)).collect())
    }

    /// Number of members `E`.
    pub fn members(&self) -> i64 {
        self.members
    }

    /// All members: `[B, in]` or `[E, B, in]` → `[E, B, out]`. Dropout only when `dropout_rng`
    /// is given.
    pub fn forward(&self, x: &Tensor, dropout_rng: Option<&mut AgentRng>) -> Tensor {
        self.run(x, None, dropout_rng)
    }

    /// Only the members in `idx` (an `i64` tensor of `M` indices, repeats allowed):
    /// `[B, in]` → `[M, B, out]`. Used for the target over a random subset (REDQ): it costs
    /// `M` members, not `E`.
    pub fn forward_subset(&self, x: &Tensor, idx: &Tensor) -> Tensor {
        self.run(x, Some(idx), None)
    }

    /// `min_i f_i(x)` over all members for a one-output ensemble: `[B, in]` → `[B]`, without
    /// dropout, differentiable (in `x` and the weights) through each row's minimizing member
    /// only. That is the gradient of `forward(x).amin(0)` (ties aside, where `amin` splits it),
    /// but the backward pass costs one member instead of `E`: all members are evaluated
    /// without gradients to find `e*(b) = argmin_i f_i(x_b)`, then each member recomputes only
    /// its own rows with gradients. For `E ≤ 2` the batched pass is cheaper and is used as is.
    pub fn forward_min(&self, x: &Tensor) -> Tensor {
        if self.members <= 2 {
            return self.forward(x, None).squeeze_dim(-1).amin(0, false);
        }
        let arg = tch::no_grad(|| self.forward(x, None).squeeze_dim(-1).argmin(0, false));
        let mut out = Tensor::zeros([x.size()[0], 1], (x.kind(), x.device()));
        for e in 0..self.members {
            let rows = arg.eq(e).nonzero().squeeze_dim(1);
            if rows.size()[0] > 0 {
                out = out.index_copy(0, &rows, &self.member(e, &x.index_select(0, &rows)));
            }
        }
        out.squeeze_dim(-1)
    }

    /// Member `e` alone on `[B, in]` → `[B, out]` (no dropout): the layers of [`Self::run`] with
    /// `W_e`, `b_e` and the LayerNorm affine fused into `layer_norm`.
    fn member(&self, e: i64, x: &Tensor) -> Tensor {
        let mut h = x.shallow_clone();
        let last = self.layers.len() - 1;
        for (i, layer) in self.layers.iter().enumerate() {
            h = layer.bias.get(e).addmm(&h, &layer.weight.get(e));
            if i == last {
                break;
            }
            if let Some((g, b)) = &layer.norm {
                let width = h.size()[1];
                h = h.layer_norm([width], Some(g.get(e).view([width])), Some(b.get(e).view([width])), 1e-5, true);
            }
            h = self.activation.apply(h);
        }
        h
    }

    /// All members on the pairs `[s_{r / k}, a_r]`: `obs` `[B, o]`, `act` `[B·k, a]` (k actions per
    /// state, state-major) → `[E, B·k, out]`, the same function as `forward(cat[repeat_interleave(obs, k),
    /// act])`. The first layer splits its weight by input rows, `[s, a] W = s W_s + a W_a`, and
    /// evaluates `s W_s + b` once per state, broadcast over its k rows (CQL's sampled actions).
    pub fn forward_paired(&self, obs: &Tensor, act: &Tensor, dropout_rng: Option<&mut AgentRng>) -> Tensor {
        let (e, first) = (self.members, &self.layers[0]);
        let (b, o, rows, a) = (obs.size()[0], obs.size()[1], act.size()[0], act.size()[1]);
        let width = first.weight.size()[2];
        let per_state =
            first.bias.baddbmm(&obs.unsqueeze(0).expand([e, b, o], false), &first.weight.narrow(1, 0, o), 1.0, 1.0);
        // A copy (`contiguous`), never a view: it is written in place below, and for one state the
        // reshape of the broadcast would be a view whose rows share memory.
        let mut h = per_state.unsqueeze(2).expand([e, b, rows / b, width], false).contiguous().view([e, rows, width]);
        let _ = h.baddbmm_(&act.unsqueeze(0).expand([e, rows, a], false), &first.weight.narrow(1, o, a));
        self.layers_from(h, 0, None, dropout_rng)
    }

    fn run(&self, x: &Tensor, idx: Option<&Tensor>, dropout_rng: Option<&mut AgentRng>) -> Tensor {
        let e = idx.map(|i| i.size()[0]).unwrap_or(self.members);
        let h =
            if x.dim() == 2 { x.unsqueeze(0).expand([e, x.size()[0], x.size()[1]], false) } else { x.shallow_clone() };
        self.layers_from(h, -1, idx, dropout_rng)
    }

    /// The layers after layer `done` (−1: all of them) on `h`, the members `idx` (or all).
    fn layers_from(
        &self,
        mut h: Tensor,
        done: i64,
        idx: Option<&Tensor>,
        mut dropout_rng: Option<&mut AgentRng>,
    ) -> Tensor {
        let pick = |t: &Tensor| match idx {
            Some(i) => t.index_select(0, i),
            None => t.shallow_clone(),
        };
        let last = self.layers.len() - 1;
        for (i, layer) in self.layers.iter().enumerate() {
            // h_e = b_e + h_e W_e for every member e in one batched matmul.
            if i as i64 > done {
                h = if i == last && layer.weight.size()[2] == 1 {
                    one_output_head(&h, &pick(&layer.weight), &pick(&layer.bias))
                } else {
                    pick(&layer.bias).baddbmm(&h, &pick(&layer.weight), 1.0, 1.0)
                };
            }
            if i == last {
                break;
            }
            if self.dropout > 0.0 {
                if let Some(rng) = dropout_rng.as_deref_mut() {
                    h = dropout(&h, self.dropout, rng);
                }
            }
            if let Some((g, b)) = &layer.norm {
                let width = h.size()[2];
                h = pick(b).addcmul(&h.layer_norm([width], None::<Tensor>, None::<Tensor>, 1e-5, true), &pick(g));
            }
            h = self.activation.apply(h);
        }
        h
    }
}

/// The one-output head `q_e = h_e w_e + b_e` as a product and a row sum: libtorch's CPU `bmm`
/// with a single output column takes a slow path (measured here at 256 rows × 256 wide: 143 µs
/// against 30 µs forward for 2 members, 701 µs against 102 µs for 10), and every critic pass
/// ends in this head.
fn one_output_head(h: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    (h * w.transpose(1, 2)).sum_dim_intlist(-1, true, Kind::Float) + b
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::nn::Mlp;

    /// Move LayerNorm's gains and shifts and every bias off their initial values (ones and
    /// zeros), so a test comparing two implementations sees them.
    pub(crate) fn perturb_norms_and_biases(p: &ParamSet, rng: &mut AgentRng) {
        tch::no_grad(|| {
            for (n, t) in p.named() {
                if n.contains("/ln") || n.ends_with("bias") {
                    let _ = t.shallow_clone().copy_(&(rng.normal(&t.size(), Device::Cpu) * 0.3 + t));
                }
            }
        });
    }

    /// The batched ensemble equals E separate MLPs holding member e's weights.
    #[test]
    fn ensemble_equals_loop_over_members() {
        for layer_norm in [false, true] {
            let cfg = MlpConfig { hidden: vec![16, 8], layer_norm, ..MlpConfig::default() };
            let mut p = ParamSet::new();
            let mut rng = AgentRng::new(5);
            let ens = EnsembleMlp::new(&mut p, "critic", 3, 4, 1, &cfg, 1.0, &mut rng, Device::Cpu);
            perturb_norms_and_biases(&p, &mut rng);
            let x = rng.normal(&[6, 4], Device::Cpu);
            let y = ens.forward(&x, None);
            assert_eq!(y.size(), vec![3, 6, 1]);
            let named: std::collections::HashMap<&str, &Tensor> =
                p.named().iter().map(|(n, t)| (n.as_str(), t)).collect();
            for e in 0..3 {
                let mut q = ParamSet::new();
                let mlp = Mlp::new(&mut q, "critic", 4, 1, &cfg, 1.0, &mut AgentRng::new(0), Device::Cpu);
                tch::no_grad(|| {
                    for (n, t) in q.named() {
                        let src = named[n.as_str()].get(e).reshape(t.size());
                        let _ = t.shallow_clone().copy_(&src);
                    }
                });
                let ye = mlp.forward(&x, None);
                let diff = (ye - y.get(e)).abs().max().double_value(&[]);
                assert!(diff < 1e-5, "member {e} layer_norm {layer_norm}: {diff}");
            }
            // The min with per-row recomputation equals the batched min, gradients included.
            let xg = x.detach().set_requires_grad(true);
            let want = ens.forward(&xg, None).squeeze_dim(-1).amin(0, false);
            let got = ens.forward_min(&xg);
            assert!((&got - &want).abs().max().double_value(&[]) < 1e-5);
            let w = Tensor::run_backward(&[want.sum(Kind::Float)], &[&xg], false, false);
            let g = Tensor::run_backward(&[got.sum(Kind::Float)], &[&xg], false, false);
            assert!((&g[0] - &w[0]).abs().max().double_value(&[]) < 1e-5, "forward_min input gradient");
            // Paired rows: each state with k = 2 actions, against the repeated-observation input.
            let (obs, act) = (x.narrow(1, 0, 3), rng.normal(&[12, 1], Device::Cpu));
            let want =
                ens.forward(&Tensor::cat(&[obs.repeat_interleave_self_int(2, 0, None), act.shallow_clone()], 1), None);
            assert!(
                (ens.forward_paired(&obs, &act, None) - want).abs().max().double_value(&[]) < 1e-5,
                "forward_paired"
            );
            // A subset with a repeat picks those members.
            let idx = Tensor::from_slice(&[2i64, 0, 2]);
            let ys = ens.forward_subset(&x, &idx);
            let want = Tensor::stack(&[y.get(2), y.get(0), y.get(2)], 0);
            assert_eq!((ys - want).abs().max().double_value(&[]), 0.0);
        }
    }
}
