//! One regression step of an ensemble: `L = ℓ(f(x)) + Σ_l ½ λ_l ‖W_l‖²`, a loss `ℓ` of the
//! members' head output plus per-layer weight decay, and its gradients (Uni-O4's dynamics
//! ensemble, [`EnsembleMlp::decayed_fit`]).
//!
//! For plain dense layers with SiLU between them on float32 CPU tensors the layers are written
//! out: each hidden layer is one batched matmul and one fused bias + SiLU pass
//! ([`crate::nn::silu`]) forward, one fused pass and two matmuls backward (the hidden layers'
//! products on [`crate::nn::gemm`]'s AVX-512 kernels where they run); autograd only sees `ℓ` on
//! the head's output, and the weight decay's gradient `λ_l W_l` is the addend of the matmul that
//! forms `∂W_l`. Elsewhere autograd differentiates the whole of `L` (the reference).

use super::EnsembleMlp;
use crate::nn::{gemm, path, silu, team, ParamSet};
use tch::{Device, Kind, Tensor};

impl EnsembleMlp {
    /// `(L, ∂L/∂θ)` for `L = head_loss(f(x)) + Σ_l ½ λ_l ‖W_l‖²` on inputs `x` `[E, B, in]`, with
    /// `λ_l = decay[l]` for the dense layers (the head last). `head_loss` maps the head's output
    /// `[E, B, out]` to a scalar and may also reach the parameters `extra`; `params` is the
    /// network's parameter set followed by `extra`, the order of the gradients returned. `L` is
    /// read back as a number (the weight decay's part summed in f64 on the written-out path).
    pub(crate) fn decayed_fit(
        &self,
        params: &ParamSet,
        x: &Tensor,
        decay: &[f64],
        extra: &[Tensor],
        head_loss: &dyn Fn(&Tensor) -> Tensor,
    ) -> (f64, Vec<Tensor>) {
        let Some(layers) = self.silu_layers().filter(|l| path::fast_cpu(x) && path::fast_cpu(l[0].0)) else {
            let out = self.forward(x, None);
            let fit = head_loss(&out);
            let decay = self
                .layers
                .iter()
                .zip(decay)
                .map(|(l, d)| l.weight.square().sum(Kind::Float) * (0.5 * d))
                .fold(fit.zeros_like(), |a, b| a + b);
            let loss = fit + decay;
            let grads = Tensor::run_backward(&[&loss], &params.tensors(), false, false);
            return (loss.double_value(&[]), grads);
        };
        path::hit();
        let threads = team::threads();
        let (inputs, sigmas, head_out) = silu_forward(&layers, x, threads);
        // ℓ on the head's output, by autograd (small tensors).
        let out = head_out.set_requires_grad(true);
        let fit = head_loss(&out);
        let wrt: Vec<&Tensor> = std::iter::once(&out).chain(extra).collect();
        let mut extra_grads = Tensor::run_backward(&[&fit], &wrt, false, false);
        let grad_out = extra_grads.remove(0);
        let mut loss = fit.double_value(&[]);
        let mut grads = tch::no_grad(|| silu_backward(&layers, &inputs, &sigmas, grad_out, decay, threads));
        // The weight decay's value Σ_l ½ λ_l ‖W_l‖².
        tch::no_grad(|| {
            for ((w, _), l) in layers.iter().zip(decay) {
                let flat = w.reshape([-1]);
                loss += 0.5 * l * flat.dot(&flat).double_value(&[]);
            }
        });
        grads.extend(extra_grads);
        (loss, grads)
    }
}

/// The forward pass written out, without gradients: each layer's input (the first one `x` made
/// contiguous), each hidden layer's pre-activation `z`, and the head's output.
fn silu_forward(layers: &[(&Tensor, &Tensor)], x: &Tensor, threads: usize) -> (Vec<Tensor>, Vec<Tensor>, Tensor) {
    let last = layers.len() - 1;
    let (mut inputs, mut sigmas) = (Vec::with_capacity(layers.len()), Vec::with_capacity(last));
    let head_out = tch::no_grad(|| {
        inputs.push(x.contiguous());
        for (w, b) in &layers[..last] {
            let x = inputs.last().expect("an input");
            let z = gemm::bmm(x, w, None).unwrap_or_else(|| x.bmm(w));
            let h = z.empty_like();
            silu::forward(&z, &h, &b.contiguous(), threads);
            sigmas.push(z);
            inputs.push(h);
        }
        let (w, b) = layers[last];
        b.baddbmm(inputs.last().expect("an input"), w, 1.0, 1.0)
    });
    (inputs, sigmas, head_out)
}

/// The backward pass written out from the head's output gradient `grad_out`: `(∂W_l, ∂b_l)`
/// for every layer in order, flattened, with `∂W_l = λ_l W_l + xᵀ g_z`.
fn silu_backward(
    layers: &[(&Tensor, &Tensor)],
    inputs: &[Tensor],
    sigmas: &[Tensor],
    grad_out: Tensor,
    decay: &[f64],
    threads: usize,
) -> Vec<Tensor> {
    let last = layers.len() - 1;
    let mut per_layer: Vec<(Tensor, Tensor)> = Vec::with_capacity(layers.len());
    let (w, _) = layers[last];
    per_layer.push((
        w.baddbmm(&inputs[last].transpose(1, 2), &grad_out, decay[last], 1.0),
        grad_out.sum_dim_intlist(&[1i64][..], true, Kind::Float),
    ));
    let mut grad_h = grad_out.bmm(&w.transpose(1, 2));
    for i in (0..last).rev() {
        let (w, b) = layers[i];
        let grad_b = Tensor::zeros(b.size(), (Kind::Float, Device::Cpu));
        silu::backward(&grad_h, &sigmas[i], &inputs[i + 1], &grad_b, threads);
        let grad_w = match gemm::bmm_at(&inputs[i], &grad_h) {
            Some(p) => p + w * decay[i],
            None => w.baddbmm(&inputs[i].transpose(1, 2), &grad_h, decay[i], 1.0),
        };
        let below = (i > 0).then(|| gemm::bmm_bt(&grad_h, w).unwrap_or_else(|| grad_h.bmm(&w.transpose(1, 2))));
        per_layer.push((grad_w, grad_b));
        if let Some(next) = below {
            grad_h = next;
        }
    }
    per_layer.reverse();
    per_layer.into_iter().flat_map(|(w, b)| [w, b]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::{Activation, MlpConfig};
    use crate::rng::AgentRng;

    /// The written-out step's loss and every gradient equal autograd's on the same loss (the
    /// path an ensemble with dropout, evaluated without it, takes), on a small ensemble (one
    /// thread) and one large enough to split its members over threads, with a parameter outside
    /// the network that the head loss reaches.
    #[test]
    fn written_out_step_matches_autograd() {
        for (hidden, rows) in [(vec![19, 13], 7), (vec![64, 64, 64], 200)] {
            let decay: Vec<f64> = (0..=hidden.len()).map(|i| 1e-3 * (i + 1) as f64).collect();
            let run = |dropout: f64| {
                let cfg =
                    MlpConfig { hidden: hidden.clone(), activation: Activation::Silu, dropout, ..MlpConfig::default() };
                let (mut p, mut rng) = (ParamSet::new(), AgentRng::new(5));
                let net = EnsembleMlp::new(&mut p, "net", 3, 6, 10, &cfg, 1.0, &mut rng, Device::Cpu);
                let shift = p.add("net/shift", rng.normal(&[1, 1, 10], Device::Cpu), Device::Cpu);
                let (x, y) = (rng.normal(&[3, rows, 6], Device::Cpu) * 2.0, rng.normal(&[3, rows, 10], Device::Cpu));
                let head_loss = |out: &Tensor| ((out - &y).square() * shift.exp()).mean(Kind::Float) * 3.0;
                assert_eq!(net.silu_layers().is_some(), dropout == 0.0);
                net.decayed_fit(&p, &x, &decay, &[shift.shallow_clone()], &head_loss)
            };
            let ((loss, got), (want_loss, want)) = (run(0.0), run(0.1));
            assert!((loss - want_loss).abs() < 1e-5 * want_loss.abs().max(1.0), "loss {loss} against {want_loss}");
            assert_eq!(got.len(), want.len());
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g.size(), w.size(), "parameter {i}");
                let diff = (g - w).abs().max().double_value(&[]);
                assert!(diff < 1e-5 * (1.0 + w.abs().max().double_value(&[])), "parameter {i}: {diff}");
            }
        }
    }
}
