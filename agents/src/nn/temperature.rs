//! Learned entropy temperature α (SAC with automatic tuning, arXiv 1812.05905 §5).
//!
//! `L_α = α · (−E[log π(a|s)] − H̄) = −α (E[log π] + H̄)`: α grows when the policy's entropy is
//! below the target H̄ and shrinks above it. α is parameterized either as `exp(log α)` (the SAC
//! paper, CleanRL) or as `softplus(ψ)` (the Lagrange multiplier of WSRL / JaxCQL).

use super::{path, ParamSet, Trained};
use serde::{Deserialize, Serialize};
use tch::{Device, Tensor};

/// How α is parameterized.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TemperatureForm {
    /// α = exp(θ).
    LogAlpha,
    /// α = softplus(θ).
    Softplus,
}

/// A learnable scalar α > 0.
#[derive(Debug)]
pub struct Temperature {
    param: Tensor,
    form: TemperatureForm,
}

impl Temperature {
    /// α starting at `init` (> 0), registered as `{prefix}/param`.
    pub fn new(params: &mut ParamSet, prefix: &str, init: f64, form: TemperatureForm, device: Device) -> Self {
        let raw = match form {
            TemperatureForm::LogAlpha => init.ln(),
            // softplus⁻¹(α) = log(exp(α) − 1) = α + log(1 − exp(−α)), stable for large α.
            TemperatureForm::Softplus => init + (-(-init).exp()).ln_1p(),
        };
        let param = params.add(format!("{prefix}/param"), Tensor::from_slice(&[raw as f32]), device);
        Self { param, form }
    }

    /// α as [`Temperature::new`] makes it, trained by its own Adam at learning rate `lr`.
    pub fn trained(prefix: &str, init: f64, form: TemperatureForm, lr: f64, device: Device) -> Trained<Self> {
        Trained::new(lr, |params| Self::new(params, prefix, init, form, device))
    }

    /// α as a differentiable `[1]` tensor.
    pub fn alpha(&self) -> Tensor {
        match self.form {
            TemperatureForm::LogAlpha => self.param.exp(),
            TemperatureForm::Softplus => self.param.softplus(),
        }
    }

    /// `L_α = −α (E[log π] + H̄)` with `log π` detached.
    pub fn loss(&self, log_prob: &Tensor, target_entropy: f64) -> Tensor {
        let gap = (log_prob.detach() + target_entropy).mean(tch::Kind::Float);
        -(self.alpha() * gap).sum(tch::Kind::Float)
    }

    /// `L_α` and its gradient in the parameter, `(L_α, ∂L_α/∂θ)`: in closed form on the CPU
    /// ([`Temperature::closed_form`]), elsewhere (or with the generic path forced,
    /// [`crate::nn::path`]) by autograd on [`Temperature::loss`] (on an accelerator the closed
    /// form's reads would synchronize).
    pub fn loss_and_grad(&self, log_prob: &Tensor, target_entropy: f64) -> (Tensor, Tensor) {
        if path::fast_cpu(&self.param) {
            path::hit();
            return self.closed_form(log_prob, target_entropy);
        }
        let loss = self.loss(log_prob, target_entropy);
        let grad = Tensor::run_backward(&[&loss], &[&self.param], false, false).pop().expect("one gradient");
        (loss, grad)
    }

    /// `L_α` and `∂L_α/∂θ = −(E[log π] + H̄) dα/dθ` with `dα/dθ = α` (`exp`) or `σ(θ)`
    /// (`softplus`), in closed form on the host: one read of `E[log π]` and of θ instead of a
    /// graph and a backward pass.
    fn closed_form(&self, log_prob: &Tensor, target_entropy: f64) -> (Tensor, Tensor) {
        let gap = log_prob.detach().mean(tch::Kind::Float).double_value(&[]) + target_entropy;
        let theta = self.param.double_value(&[0]);
        let (alpha, slope) = match self.form {
            TemperatureForm::LogAlpha => (theta.exp(), theta.exp()),
            TemperatureForm::Softplus => {
                (if theta > 20.0 { theta } else { theta.exp().ln_1p() }, 1.0 / (1.0 + (-theta).exp()))
            }
        };
        let device = self.param.device();
        (
            Tensor::from(-(alpha * gap) as f32).to_device(device),
            Tensor::from_slice(&[(-gap * slope) as f32]).to_device(device),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_start_at_init_and_follow_the_entropy_gap() {
        for form in [TemperatureForm::LogAlpha, TemperatureForm::Softplus] {
            let mut p = ParamSet::new();
            let t = Temperature::new(&mut p, "temperature", 0.7, form, Device::Cpu);
            assert!((t.alpha().double_value(&[0]) - 0.7).abs() < 1e-6);
            // Entropy −E[log π] = −1 is below the target H̄ = 0, so α must grow: dL/dθ < 0.
            let lp = Tensor::from_slice(&[1.0f32, 1.0]);
            let g = Tensor::run_backward(&[t.loss(&lp, 0.0)], &p.tensors(), false, false);
            assert!(g[0].double_value(&[0]) < 0.0, "{form:?}");
            // The closed form gives autograd's loss and gradient.
            for (lp, h) in [(Tensor::from_slice(&[1.0f32, 1.0]), 0.0), (Tensor::from_slice(&[-2.0f32, 0.5, 3.0]), -6.0)]
            {
                let (loss, grad) = t.closed_form(&lp, h);
                let want = t.loss(&lp, h);
                let want_g = Tensor::run_backward(&[&want], &p.tensors(), false, false);
                assert!((loss.double_value(&[]) - want.double_value(&[])).abs() < 1e-6, "{form:?} loss");
                assert_eq!(grad.size(), vec![1]);
                assert!((grad.double_value(&[0]) - want_g[0].double_value(&[0])).abs() < 1e-6, "{form:?} gradient");
            }
        }
    }
}
