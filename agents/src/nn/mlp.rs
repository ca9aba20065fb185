//! Multi-layer perceptron: `x → [Dense → Dropout → LayerNorm → ReLU] × H → Dense`.
//!
//! Shapes: input `[B, in]`, output `[B, out]`. Each hidden block is `h = relu(LN(drop(x W + b)))`
//! with `W: [in, out]` (so the forward pass is one `addmm` per layer), LayerNorm and dropout
//! optional, in the layer order of the WSRL / jaxrl reference MLP. Weights are orthogonal with
//! gain √2 for hidden layers and `head_gain` for the output layer; biases start at zero.

use super::policy_graph::{floats, Layer, PolicyGraph};
use super::{init::dense, init::WeightInit, ParamSet};
use crate::rng::AgentRng;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

/// ε of the hidden layers' LayerNorm.
const LAYER_NORM_EPS: f64 = 1e-5;

/// Shape and regularization of an MLP (the output width is given by its user).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MlpConfig {
    /// Hidden layer widths.
    pub hidden: Vec<i64>,
    /// LayerNorm after every hidden layer.
    pub layer_norm: bool,
    /// Dropout probability after every hidden layer (0 = off); active only in updates.
    pub dropout: f64,
    /// How the weights start: `orthogonal` (the default) or `fan_in_uniform` (PyTorch's).
    pub init: WeightInit,
    /// The hidden layers' nonlinearity: `relu` (the default), `tanh` (CleanRL's PPO, Uni-O4's
    /// HalfCheetah policies) or `silu` (the MOBILE dynamics model Uni-O4 uses).
    #[serde(skip_serializing_if = "Activation::is_relu")]
    pub activation: Activation,
}

/// A hidden layer's nonlinearity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// `max(x, 0)`.
    #[default]
    Relu,
    /// `tanh x`.
    Tanh,
    /// `x · σ(x)` (Swish).
    Silu,
}

impl Activation {
    /// Whether this is the default ReLU (then it is left out of a written config).
    pub fn is_relu(&self) -> bool {
        *self == Activation::Relu
    }

    /// Apply to `h`, which the caller owns (ReLU in place: the producer's backward does not
    /// need its output).
    pub fn apply(self, mut h: Tensor) -> Tensor {
        match self {
            Activation::Relu => {
                let _ = h.relu_();
                h
            }
            Activation::Tanh => h.tanh(),
            Activation::Silu => h.silu(),
        }
    }
}

impl Default for MlpConfig {
    fn default() -> Self {
        Self {
            hidden: vec![256, 256],
            layer_norm: false,
            dropout: 0.0,
            init: WeightInit::Orthogonal,
            activation: Activation::Relu,
        }
    }
}

/// One dense layer `y = x W + b`, `W: [in, out]`.
#[derive(Debug)]
pub struct Dense {
    /// `[in, out]`.
    pub weight: Tensor,
    /// `[out]`.
    pub bias: Tensor,
}

impl Dense {
    /// A new layer registered in `params` as `{name}/weight`, `{name}/bias`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        params: &mut ParamSet,
        name: &str,
        fan_in: i64,
        fan_out: i64,
        gain: f64,
        init: WeightInit,
        rng: &mut AgentRng,
        device: Device,
    ) -> Self {
        let (w, b) = dense(rng, fan_in, fan_out, gain, init);
        let weight = params.add(format!("{name}/weight"), w, device);
        let bias = params.add(format!("{name}/bias"), b, device);
        Self { weight, bias }
    }

    /// `x W + b`.
    pub fn forward(&self, x: &Tensor) -> Tensor {
        self.bias.addmm(x, &self.weight)
    }

    /// A copy that shares no autograd history (for export and inference outside training).
    pub fn detached(&self) -> Self {
        Self { weight: self.weight.detach().copy(), bias: self.bias.detach().copy() }
    }

    /// The layer as data, its first `n` outputs only (a [`PolicyGraph`] step).
    fn layer(&self, n: i64) -> Layer {
        let (fan_in, weight, bias) = (self.weight.size()[0], self.weight.narrow(1, 0, n), self.bias.narrow(0, 0, n));
        Layer::Dense { weight: floats(&weight), bias: floats(&bias), fan_in: fan_in as usize, fan_out: n as usize }
    }
}

/// An MLP with a linear output layer.
#[derive(Debug)]
pub struct Mlp {
    layers: Vec<Dense>,
    norms: Vec<(Tensor, Tensor)>,
    head: Dense,
    dropout: f64,
    activation: Activation,
}

impl Mlp {
    /// Build an MLP `in_dim → cfg.hidden… → out_dim`, registering parameters under `prefix`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        params: &mut ParamSet,
        prefix: &str,
        in_dim: i64,
        out_dim: i64,
        cfg: &MlpConfig,
        head_gain: f64,
        rng: &mut AgentRng,
        device: Device,
    ) -> Self {
        let mut layers = Vec::new();
        let mut norms = Vec::new();
        let mut d = in_dim;
        for (i, &h) in cfg.hidden.iter().enumerate() {
            layers.push(Dense::new(params, &format!("{prefix}/l{i}"), d, h, 2f64.sqrt(), cfg.init, rng, device));
            if cfg.layer_norm {
                let g =
                    params.add(format!("{prefix}/ln{i}/weight"), Tensor::ones([h], (Kind::Float, Device::Cpu)), device);
                let b =
                    params.add(format!("{prefix}/ln{i}/bias"), Tensor::zeros([h], (Kind::Float, Device::Cpu)), device);
                norms.push((g, b));
            }
            d = h;
        }
        let head = Dense::new(params, &format!("{prefix}/head"), d, out_dim, head_gain, cfg.init, rng, device);
        Self { layers, norms, head, dropout: cfg.dropout, activation: cfg.activation }
    }

    /// A copy with detached weights, for inference outside training (TorchScript export).
    pub fn detached(&self) -> Self {
        Self {
            layers: self.layers.iter().map(Dense::detached).collect(),
            norms: self.norms.iter().map(|(g, b)| (g.detach().copy(), b.detach().copy())).collect(),
            head: self.head.detached(),
            dropout: self.dropout,
            activation: self.activation,
        }
    }

    /// The dense layers (hidden ones, then the head), the LayerNorm affines (one per hidden
    /// layer, or none), the dropout probability and the activation: what
    /// [`super::EnsembleMlp::of_mlp`] views as a one-member ensemble.
    pub(crate) fn parts(&self) -> (Vec<&Dense>, &[(Tensor, Tensor)], f64, Activation) {
        (self.layers.iter().chain(std::iter::once(&self.head)).collect(), &self.norms, self.dropout, self.activation)
    }

    /// The network as data (no dropout: the deterministic policy's pass).
    pub fn graph(&self) -> PolicyGraph {
        self.graph_of_outputs(self.head.bias.size()[0])
    }

    /// [`Self::graph`] keeping only the first `n` outputs of the head (an actor's mean half).
    pub(crate) fn graph_of_outputs(&self, n: i64) -> PolicyGraph {
        let mut layers = Vec::new();
        for (i, layer) in self.layers.iter().enumerate() {
            layers.push(layer.layer(layer.bias.size()[0]));
            if let Some((g, b)) = self.norms.get(i) {
                layers.push(Layer::LayerNorm { gain: floats(g), bias: floats(b), eps: LAYER_NORM_EPS });
            }
            layers.push(Layer::Activation(self.activation));
        }
        layers.push(self.head.layer(n));
        let in_dim = self.layers.first().unwrap_or(&self.head).weight.size()[0];
        PolicyGraph::new(in_dim as usize, layers)
    }

    /// Forward pass. Dropout is applied only when `dropout_rng` is given (updates), with masks
    /// drawn from it.
    pub fn forward(&self, x: &Tensor, mut dropout_rng: Option<&mut AgentRng>) -> Tensor {
        let mut h = x.shallow_clone();
        for (i, layer) in self.layers.iter().enumerate() {
            h = layer.forward(&h);
            if self.dropout > 0.0 {
                if let Some(rng) = dropout_rng.as_deref_mut() {
                    h = dropout(&h, self.dropout, rng);
                }
            }
            if let Some((g, b)) = self.norms.get(i) {
                h = h.layer_norm([g.size()[0]], Some(g), Some(b), LAYER_NORM_EPS, true);
            }
            h = self.activation.apply(h);
        }
        self.head.forward(&h)
    }
}

/// Inverted dropout with a mask from `rng`: `x · 1(u ≥ p) / (1 − p)`.
pub fn dropout(x: &Tensor, p: f64, rng: &mut AgentRng) -> Tensor {
    let keep = rng.uniform_tensor(&x.size(), x.device()).ge(p).to_kind(Kind::Float);
    x * keep * (1.0 / (1.0 - p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_names_and_layer_norm() {
        let mut p = ParamSet::new();
        let mut rng = AgentRng::new(0);
        let cfg = MlpConfig { hidden: vec![32, 16], layer_norm: true, ..MlpConfig::default() };
        let m = Mlp::new(&mut p, "q", 5, 3, &cfg, 1.0, &mut rng, Device::Cpu);
        let names: Vec<&str> = p.named().iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "q/l0/weight",
                "q/l0/bias",
                "q/ln0/weight",
                "q/ln0/bias",
                "q/l1/weight",
                "q/l1/bias",
                "q/ln1/weight",
                "q/ln1/bias",
                "q/head/weight",
                "q/head/bias"
            ]
        );
        let x = Tensor::from_slice(&[0.5f32; 35]).view([7, 5]);
        assert_eq!(m.forward(&x, None).size(), vec![7, 3]);
    }

    #[test]
    fn dropout_keeps_expectation() {
        let mut rng = AgentRng::new(9);
        let x = Tensor::ones([100_000], (Kind::Float, Device::Cpu));
        let y = dropout(&x, 0.25, &mut rng);
        let zeros = y.eq(0.0).to_kind(Kind::Float).mean(Kind::Float).double_value(&[]);
        assert!((zeros - 0.25).abs() < 0.01, "{zeros}");
        assert!((y.mean(Kind::Float).double_value(&[]) - 1.0).abs() < 0.02);
    }
}
