//! A deterministic policy described as data: the ordered layers that map observations
//! `[B, obs_dim]` to actions `[B, act_dim]` in `[-1, 1]`, with copies of the weights the agent
//! acts with. It is what `o2o export --to onnx` writes into an ONNX graph (the exporter adds the
//! clip and the rescaling to the env's bounds); the agent's own `act` and TorchScript export
//! keep running its network code, and the export tests check the two agree.
//!
//! Each building block describes itself once ([`super::Mlp::graph`], the actors' mode or mean,
//! the state normalizations, FamO2O's β conditioning); an algorithm only composes them:
//!
//! ```text
//! [normalization] → [AppendBeta] → (Dense → [LayerNorm] → activation) × H → Dense → [Tanh] → [Clip]
//! ```
//!
//! Why data and not a trace of the closure: libtorch cannot write ONNX, and a list of known
//! layers can be written by a small encoder, checked layer by layer, and read by a person.

use super::{Activation, BetaEncoding, BetaRange};
use tch::{Kind, Tensor};

/// One step of a [`PolicyGraph`]; widths in the comments are per row.
#[derive(Clone, Debug, PartialEq)]
pub enum Layer {
    /// `(s − μ) / scale` in float32 (TD3+BC's and BC's [`super::StateNorm`]; `scale = σ + ε`).
    Standardize {
        /// μ, one per input number.
        mean: Vec<f32>,
        /// The divisor, one per input number.
        scale: Vec<f32>,
    },
    /// `clip((s − μ) / std, −c, c)` computed in float64, the result float32 (PPO's and Uni-O4's
    /// [`super::ObsNorm`]; `std = √(σ² + ε)`).
    Standardize64 {
        /// μ, one per input number.
        mean: Vec<f64>,
        /// `√(σ² + ε)`, one per input number.
        std: Vec<f64>,
        /// `c`, or none.
        clip: Option<f64>,
    },
    /// `x W + b`, `W: [fan_in, fan_out]` row-major.
    Dense {
        /// `fan_in · fan_out` numbers, row-major.
        weight: Vec<f32>,
        /// `fan_out` numbers.
        bias: Vec<f32>,
        /// Input width.
        fan_in: usize,
        /// Output width.
        fan_out: usize,
    },
    /// LayerNorm over the last dimension: `(x − E x) / √(Var x + ε) · γ + β`.
    LayerNorm {
        /// γ.
        gain: Vec<f32>,
        /// β.
        bias: Vec<f32>,
        /// ε.
        eps: f64,
    },
    /// An elementwise nonlinearity (ReLU, tanh, SiLU).
    Activation(Activation),
    /// `clip(x, low, high)`.
    Clip {
        /// Lower bound.
        low: f64,
        /// Upper bound.
        high: f64,
    },
    /// `x → [x, e(β)]` (FamO2O's universal policy input): `d` more numbers per row.
    AppendBeta {
        /// The sinusoidal encoding `e`.
        encoding: BetaEncoding,
        /// Where β comes from.
        beta: BetaSource,
    },
}

/// Where a β-conditioned policy's β comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum BetaSource {
    /// The balance model's deterministic β(s) = map(u(s)): `layers` map the graph's
    /// observations to `u` `[B, 1]` (tanh included), `range` maps `u` to β.
    Model {
        /// Observations → u.
        layers: Vec<Layer>,
        /// u → β.
        range: BetaRange,
    },
    /// One β for every row.
    Fixed(f64),
    /// A second input of the graph, `β` `[B]`.
    Input,
}

/// The ordered layers of a deterministic policy on `obs_dim` numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyGraph {
    /// Width of the observations.
    pub obs_dim: usize,
    /// The layers, first to last.
    pub layers: Vec<Layer>,
}

impl PolicyGraph {
    /// `layers` applied, in order, to observations of `obs_dim` numbers.
    pub fn new(obs_dim: usize, layers: Vec<Layer>) -> Self {
        Self { obs_dim, layers }
    }

    /// This graph with `layer` applied to its output.
    pub fn then(mut self, layer: Layer) -> Self {
        self.layers.push(layer);
        self
    }

    /// This graph with `norm` (when there is one) applied to the observations first.
    pub fn normalized(mut self, norm: Option<Layer>) -> Self {
        if let Some(norm) = norm {
            self.layers.insert(0, norm);
        }
        self
    }

    /// The β of every [`Layer::AppendBeta`] replaced by `beta`; `Err` when the graph takes no β.
    pub fn with_beta(mut self, beta: BetaSource) -> Result<Self, String> {
        let mut found = false;
        for layer in &mut self.layers {
            if let Layer::AppendBeta { beta: b, .. } = layer {
                *b = beta.clone();
                found = true;
            }
        }
        match found {
            true => Ok(self),
            false => Err("this policy is not conditioned on β".into()),
        }
    }

    /// Whether a layer takes β as a second input ([`BetaSource::Input`]).
    pub fn takes_beta(&self) -> bool {
        self.layers.iter().any(|l| matches!(l, Layer::AppendBeta { beta: BetaSource::Input, .. }))
    }

    /// The output width, after checking that every layer fits the width before it; `Err`
    /// names the first layer (by index) that does not.
    pub fn out_dim(&self) -> Result<usize, String> {
        chain_width(self.obs_dim, self.obs_dim, &self.layers)
    }
}

/// The width after `layers` on `width` numbers, where `obs_dim` is what a β model reads.
fn chain_width(obs_dim: usize, mut width: usize, layers: &[Layer]) -> Result<usize, String> {
    for (i, layer) in layers.iter().enumerate() {
        let wrong = |what: &str, n: usize| Err(format!("layer {i} ({what}) takes {n} numbers, its input has {width}"));
        width = match layer {
            Layer::Standardize { mean, scale } if mean.len() != width || scale.len() != width => {
                return wrong("standardize", mean.len())
            }
            Layer::Standardize64 { mean, std, .. } if mean.len() != width || std.len() != width => {
                return wrong("standardize", mean.len())
            }
            Layer::Dense { weight, bias, fan_in, fan_out } => {
                if *fan_in != width {
                    return wrong("dense", *fan_in);
                }
                if weight.len() != fan_in * fan_out || bias.len() != *fan_out {
                    return Err(format!("layer {i} (dense {fan_in}→{fan_out}) has {} weights", weight.len()));
                }
                *fan_out
            }
            Layer::LayerNorm { gain, bias, .. } if gain.len() != width || bias.len() != width => {
                return wrong("layer norm", gain.len())
            }
            Layer::AppendBeta { encoding, beta } => {
                if let BetaSource::Model { layers, .. } = beta {
                    let u = chain_width(obs_dim, obs_dim, layers).map_err(|e| format!("layer {i}'s β model: {e}"))?;
                    if u != 1 {
                        return Err(format!("layer {i}'s β model gives {u} numbers per row, not 1"));
                    }
                }
                width + encoding.dim as usize
            }
            _ => width,
        };
    }
    Ok(width)
}

/// The numbers of a tensor (any shape, any float kind), row-major, as float32.
pub(crate) fn floats(t: &Tensor) -> Vec<f32> {
    Vec::<f32>::try_from(t.detach().to_device(tch::Device::Cpu).to_kind(Kind::Float).contiguous().view([-1]))
        .expect("a float tensor converts to Vec<f32>")
}

/// The numbers of a tensor (any shape, any float kind), row-major, as float64.
pub(crate) fn doubles(t: &Tensor) -> Vec<f64> {
    Vec::<f64>::try_from(t.detach().to_device(tch::Device::Cpu).to_kind(Kind::Double).contiguous().view([-1]))
        .expect("a float tensor converts to Vec<f64>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::BetaMap;

    fn dense(fan_in: usize, fan_out: usize) -> Layer {
        Layer::Dense { weight: vec![0.5; fan_in * fan_out], bias: vec![0.0; fan_out], fan_in, fan_out }
    }

    #[test]
    fn widths_are_checked_and_beta_is_replaced() {
        let g = PolicyGraph::new(3, vec![dense(3, 4), Layer::Activation(Activation::Relu), dense(4, 2)]);
        assert_eq!(g.out_dim(), Ok(2));
        let bad = PolicyGraph::new(3, vec![dense(3, 4), dense(5, 2)]);
        assert!(bad.out_dim().unwrap_err().starts_with("layer 1 (dense) takes 5"), "{:?}", bad.out_dim());
        let norm = Layer::Standardize { mean: vec![0.0; 3], scale: vec![1.0; 3] };
        assert_eq!(g.clone().normalized(Some(norm.clone())).layers[0], norm);
        assert!(g.clone().with_beta(BetaSource::Input).is_err());

        let range = BetaRange { min: 0.5, max: 1.5, map: BetaMap::Paper };
        let model = BetaSource::Model { layers: vec![dense(3, 1), Layer::Activation(Activation::Tanh)], range };
        let enc = BetaEncoding::default();
        let cond = PolicyGraph::new(3, vec![Layer::AppendBeta { encoding: enc, beta: model }, dense(9, 2)]);
        assert_eq!(cond.out_dim(), Ok(2));
        assert!(!cond.takes_beta());
        let input = cond.clone().with_beta(BetaSource::Input).unwrap();
        assert!(input.takes_beta());
        let wide = BetaSource::Model { layers: vec![dense(3, 2)], range };
        let e = cond.with_beta(wide).unwrap().out_dim().unwrap_err();
        assert!(e.contains("gives 2 numbers"), "{e}");
    }
}
