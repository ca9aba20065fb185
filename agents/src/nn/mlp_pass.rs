//! One network's training pass (an actor's trunk, IQL's V) on the critic ensemble's CPU fast
//! path: the [`Mlp`] viewed as a one-member [`EnsembleMlp`] ([`EnsembleMlp::of_mlp`], no copy)
//! takes the taped pass, each hidden layer one matmul and one fused bias/ReLU pass
//! (LayerNorm included), the small first layer computed inside that pass, and the backward
//! pass one fused pass and two matmuls per layer. The caller's loss is differentiated by
//! autograd only down to the network's output `y` (a leaf), `∂L/∂y` is carried through the
//! network by the tape, and the other parameters the loss reaches (a free log σ) take
//! autograd's gradient as before: `∂L/∂θ` for every parameter, in the parameter set's order.
//!
//! Where the taped pass does not apply (dropout, another activation, CUDA, float64, or the
//! generic path forced, [`super::path`]) the pass is autograd's [`Mlp::forward`], with the same
//! dropout draws, and the gradients `Tensor::run_backward`'s: tests check that the two agree.

use super::ensemble::EnsembleTape;
use super::{EnsembleMlp, Mlp, ParamSet};
use crate::rng::AgentRng;
use tch::Tensor;

/// An MLP's output `y = f_θ(x)` `[B, out]` and how to differentiate a loss of it.
pub(crate) struct MlpPass {
    /// `f_θ(x)`, `[B, out]`: a leaf with a tape on the CPU fast path, part of autograd's graph
    /// elsewhere.
    pub out: Tensor,
    tape: Option<(EnsembleMlp, EnsembleTape)>,
    /// The network's parameter count (its tensors lead its optimizer's parameter set).
    trunk: usize,
}

impl MlpPass {
    /// `f_θ(x)` for `x` `[B, in]`: the taped pass where it applies, else autograd's with
    /// dropout drawn from `dropout_rng`.
    pub fn new(mlp: &Mlp, x: &Tensor, dropout_rng: Option<&mut AgentRng>) -> Self {
        let view = EnsembleMlp::of_mlp(mlp);
        let trunk = mlp.parts().0.len() * 2 + mlp.parts().1.len() * 2;
        if !view.tape_applies_any_head(x) {
            return Self { out: mlp.forward(x, dropout_rng), tape: None, trunk };
        }
        let (y, tape) = view.forward_taped(x);
        // [1, B] (one-output head) or [1, B, out] → [B, out].
        let out = y.view([x.size()[0], -1]).set_requires_grad(true);
        Self { out, tape: Some((view, tape)), trunk }
    }

    /// Whether [`MlpPass::new`] takes the taped pass for `mlp` on `x` (so draws no dropout).
    pub fn applies(mlp: &Mlp, x: &Tensor) -> bool {
        EnsembleMlp::of_mlp(mlp).tape_applies_any_head(x)
    }

    /// Whether the pass is the taped one (its output a leaf).
    pub fn is_taped(&self) -> bool {
        self.tape.is_some()
    }

    /// `∂L/∂θ` of the taped pass for a loss `L` whose gradient in the output is `grad_out`
    /// `[B, out]` and which reaches no other parameter of `params` (zeros for those).
    pub fn grads_from_out(self, grad_out: &Tensor, params: &ParamSet) -> Vec<Tensor> {
        let rest: Vec<Tensor> = params.tensors()[self.trunk..].iter().map(|p| p.detach().zeros_like()).collect();
        self.grads_from_out_and(grad_out, params, rest)
    }

    /// [`MlpPass::grads_from_out`] where the caller also formed the gradients of the other
    /// parameters of `params` (those after the network's, in order: a free log σ).
    pub fn grads_from_out_and(self, grad_out: &Tensor, params: &ParamSet, rest: Vec<Tensor>) -> Vec<Tensor> {
        let (view, tape) = self.tape.expect("grads_from_out needs the taped pass");
        let all = params.tensors();
        assert_eq!(rest.len(), all.len() - self.trunk, "one gradient for each parameter after the network's");
        let mut out = trunk_grads(&view, tape, grad_out, &all);
        out.extend(rest);
        out
    }

    /// `∂loss/∂θ` for every tensor of `params`, in its order, where `params` starts with this
    /// network's parameters (as registered by [`Mlp::new`]) and `loss` reaches them only
    /// through [`MlpPass::out`]; the rest (e.g. a free log σ) are differentiated by autograd.
    pub fn grads(self, loss: &Tensor, params: &ParamSet) -> Vec<Tensor> {
        let all = params.tensors();
        let Some((view, tape)) = self.tape else {
            return Tensor::run_backward(&[loss], &all, false, false);
        };
        let rest = &all[self.trunk..];
        let mut inputs: Vec<&Tensor> = vec![&self.out];
        inputs.extend(rest);
        let mut grads = Tensor::run_backward(&[loss], &inputs, false, false);
        let grad_out = grads.remove(0);
        let mut out = trunk_grads(&view, tape, &grad_out, &all);
        out.extend(grads);
        out
    }
}

/// The network's parameter gradients from the tape, shaped as its parameters (`params`' first
/// tensors), for the output gradient `grad_out` `[B, out]`.
fn trunk_grads(view: &EnsembleMlp, tape: EnsembleTape, grad_out: &Tensor, params: &[Tensor]) -> Vec<Tensor> {
    // [B, out] → the taped pass's [1, B] (one output) or [1, B, out].
    let grad_y = if grad_out.size()[1] == 1 { grad_out.view([1, -1]) } else { grad_out.unsqueeze(0) };
    view.backward_params(tape, &grad_y).iter().zip(params).map(|(g, p)| g.view(p.size().as_slice())).collect()
}

/// `f_θ(x)` without gradients: the fused pass where it applies (`[B, out]`), else
/// [`Mlp::forward`] under `no_grad`.
pub(crate) fn forward_no_grad(mlp: &Mlp, x: &Tensor) -> Tensor {
    let view = EnsembleMlp::of_mlp(mlp);
    if view.tape_applies_any_head(x) {
        view.forward_fused(x, None).view([x.size()[0], -1])
    } else {
        tch::no_grad(|| mlp.forward(x, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::MlpConfig;
    use tch::{Device, Kind};

    /// The taped pass's output and every gradient equal autograd's, for a one-output network
    /// (V) and a wide head (an actor's [μ, log σ]), with and without LayerNorm, with a further
    /// parameter outside the network, on few rows and on enough to be split by rows; and the
    /// no-gradient pass equals the forward pass.
    #[test]
    fn taped_pass_matches_autograd() {
        // 600 rows of the 64-wide layer pass the size at which a one-member pass is split by rows.
        for (layer_norm, out, rows) in
            [(false, 1, 9), (true, 1, 9), (false, 12, 200), (true, 5, 200), (false, 12, 600), (true, 1, 600)]
        {
            let cfg = MlpConfig { hidden: vec![64, 48], layer_norm, ..MlpConfig::default() };
            let mut p = ParamSet::new();
            let mut rng = AgentRng::new(2);
            let mlp = Mlp::new(&mut p, "net", 7, out, &cfg, 1.0, &mut rng, Device::Cpu);
            let extra = p.add("net/log_std", rng.normal(&[out], Device::Cpu), Device::Cpu);
            crate::nn::ensemble::tests::perturb_norms_and_biases(&p, &mut rng);
            let x = rng.normal(&[rows, 7], Device::Cpu);
            let target = rng.normal(&[rows, out], Device::Cpu);
            let loss_of = |y: &Tensor| ((y - &target).square() * extra.exp()).mean(Kind::Float);
            let want_y = mlp.forward(&x, None);
            let want = Tensor::run_backward(&[loss_of(&want_y)], &p.tensors(), false, false);
            let pass = MlpPass::new(&mlp, &x, None);
            assert!(pass.tape.is_some());
            let diff = (&pass.out - &want_y).abs().max().double_value(&[]);
            assert!(diff < 1e-5, "values differ by {diff}");
            let loss = loss_of(&pass.out);
            let got = pass.grads(&loss, &p);
            assert_eq!(got.len(), want.len());
            for ((g, w), (name, t)) in got.iter().zip(&want).zip(p.named()) {
                assert_eq!(g.size(), t.size(), "{name}");
                let d = (g - w).abs().max().double_value(&[]);
                assert!(
                    d < 1e-5 * (1.0 + w.abs().max().double_value(&[])),
                    "{name} (layer_norm {layer_norm}, out {out}): {d}"
                );
            }
            let nog = forward_no_grad(&mlp, &x);
            assert!(!nog.requires_grad());
            assert!((nog - want_y).abs().max().double_value(&[]) < 1e-5);
        }
    }

    /// With dropout the pass falls back to autograd with the same draws as `Mlp::forward`.
    #[test]
    fn dropout_takes_the_autograd_pass() {
        let cfg = MlpConfig { hidden: vec![16], dropout: 0.5, ..MlpConfig::default() };
        let mut p = ParamSet::new();
        let mlp = Mlp::new(&mut p, "net", 3, 2, &cfg, 1.0, &mut AgentRng::new(0), Device::Cpu);
        let x = AgentRng::new(1).normal(&[8, 3], Device::Cpu);
        let pass = MlpPass::new(&mlp, &x, Some(&mut AgentRng::new(5)));
        assert!(pass.tape.is_none());
        assert!(pass.out.equal(&mlp.forward(&x, Some(&mut AgentRng::new(5)))));
    }
}
