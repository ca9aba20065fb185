//! State normalization with fixed dataset statistics: `s̃ = (s − μ) / (σ + ε)` (TD3+BC §5,
//! ε = 1e−3; also used by BC), `μ, σ: [obs]`.
//!
//! The statistics start at μ = 0, σ + ε = 1 (identity) and are set once from the offline data
//! by [`crate::Agent::set_state_stats`] before the first update; they are part of the agent's
//! checkpoint (part `obs_norm`), so a resumed or fine-tuned agent keeps the ones it trained with.

use super::policy_graph::floats;
use super::{Activation, Layer, Mlp, ParamSet, PolicyGraph};
use tch::{Device, Kind, Tensor};

/// ε added to σ.
const EPS: f64 = 1e-3;

/// What an agent's policy does to observations with this normalization, `on` or off (its
/// `observation_normalization`).
pub fn describe(on: bool) -> String {
    match on {
        true => "the offline data's mean and standard deviation, (s − μ)/(σ + 1e-3) (inside the module)".into(),
        false => "none".into(),
    }
}

/// Fixed `(μ, σ)` of the observations.
#[derive(Debug)]
pub struct StateNorm {
    mean: Tensor,
    scale: Tensor,
}

impl StateNorm {
    /// Identity statistics for `obs_dim` numbers, registered in `params` as `obs_norm/mean`
    /// and `obs_norm/scale` (σ + ε), without gradients.
    pub fn new(params: &mut ParamSet, obs_dim: i64, device: Device) -> Self {
        let mean = params
            .add("obs_norm/mean", Tensor::zeros([obs_dim], (Kind::Float, Device::Cpu)), device)
            .set_requires_grad(false);
        let scale = params
            .add("obs_norm/scale", Tensor::ones([obs_dim], (Kind::Float, Device::Cpu)), device)
            .set_requires_grad(false);
        Self { mean, scale }
    }

    /// Set μ and σ (σ + ε is stored); lengths must be the observation size.
    pub fn set(&self, mean: &[f32], std: &[f32]) -> Result<(), crate::AgentError> {
        let n = self.mean.size()[0] as usize;
        if mean.len() != n || std.len() != n {
            return Err(crate::AgentError::Config(format!(
                "state statistics: expected {n} means and stds, found {} and {}",
                mean.len(),
                std.len()
            )));
        }
        tch::no_grad(|| {
            self.mean.shallow_clone().copy_(&Tensor::from_slice(mean).to_device(self.mean.device()));
            self.scale.shallow_clone().copy_(&(Tensor::from_slice(std).to_device(self.scale.device()) + EPS));
        });
        Ok(())
    }

    /// `(s − μ) / (σ + ε)`, `[B, obs]`.
    pub fn apply(&self, obs: &Tensor) -> Tensor {
        (obs - &self.mean) / &self.scale
    }

    /// [`Self::apply`] as data.
    pub fn layer(&self) -> Layer {
        Layer::Standardize { mean: floats(&self.mean), scale: floats(&self.scale) }
    }

    /// The graph of `a = tanh(actor(s̃))`, `s̃` normalized by `norm` when there is one (the
    /// deterministic actor of BC and TD3+BC).
    pub fn tanh_actor_graph(actor: &Mlp, norm: Option<&StateNorm>) -> PolicyGraph {
        actor.graph().then(Layer::Activation(Activation::Tanh)).normalized(norm.map(StateNorm::layer))
    }

    /// The deterministic policy `tanh(actor(norm(s)))` (norm only where given), detached from the
    /// training graph: [`crate::Agent::deterministic_policy`] of the agents whose actor is one
    /// tanh'd MLP on optionally normalized states (BC, TD3+BC); its graph is
    /// [`Self::tanh_actor_graph`].
    pub fn tanh_actor_policy(actor: &Mlp, norm: Option<&StateNorm>) -> crate::DeterministicPolicy {
        let (actor, norm) = (actor.detached(), norm.map(StateNorm::detached));
        Box::new(move |obs| {
            actor.forward(&norm.as_ref().map_or_else(|| obs.shallow_clone(), |n| n.apply(obs)), None).tanh()
        })
    }

    /// A copy that shares no state (for an exported policy).
    pub fn detached(&self) -> Self {
        Self { mean: self.mean.detach().copy(), scale: self.scale.detach().copy() }
    }
}

/// Per-column mean and standard deviation of row-major `[n, dim]` data (what the runner hands
/// to [`crate::Agent::set_state_stats`]).
pub fn column_stats(data: &[f32], dim: usize) -> (Vec<f32>, Vec<f32>) {
    let n = (data.len() / dim.max(1)).max(1) as f64;
    let mut mean = vec![0.0f64; dim];
    for row in data.chunks(dim) {
        row.iter().zip(mean.iter_mut()).for_each(|(x, m)| *m += *x as f64);
    }
    mean.iter_mut().for_each(|m| *m /= n);
    let mut var = vec![0.0f64; dim];
    for row in data.chunks(dim) {
        row.iter().zip(&mean).zip(var.iter_mut()).for_each(|((x, m), v)| *v += (*x as f64 - m).powi(2));
    }
    (mean.iter().map(|m| *m as f32).collect(), var.iter().map(|v| (v / n).sqrt() as f32).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_with_the_set_statistics() {
        let mut p = ParamSet::new();
        let n = StateNorm::new(&mut p, 2, Device::Cpu);
        let x = Tensor::from_slice(&[1.0f32, 2.0]).view([1, 2]);
        assert!(n.apply(&x).equal(&x), "identity before set");
        let (m, s) = column_stats(&[0.0, 10.0, 2.0, 10.0], 2);
        assert_eq!((m.clone(), s.clone()), (vec![1.0, 10.0], vec![1.0, 0.0]));
        n.set(&m, &s).unwrap();
        let y: Vec<f32> = Vec::try_from(n.apply(&x).view([-1])).unwrap();
        assert!((y[0] - 0.0).abs() < 1e-6 && (y[1] - (2.0 - 10.0) / 1e-3).abs() < 1e-1, "{y:?}");
        assert!(n.set(&[0.0], &[1.0]).is_err());
        assert_eq!(p.named().len(), 2);
    }
}
