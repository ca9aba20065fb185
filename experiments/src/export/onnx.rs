//! A [`PolicyGraph`] as an ONNX model (opset 17, IR version 8): observations
//! `float32 [batch, obs_dim]` (and, where asked, β `float32 [batch]`) → actions
//! `float32 [batch, act_dim]` in the env's bounds.
//!
//! The graph holds everything between the env's observation and the env's action, as d3rlpy's
//! `save_policy` does: the agent's observation normalization, its actor, the tanh squashing where
//! the agent squashes, the clip to `[-1, 1]` and last the rescaling
//! `low + (a + 1) · (high − low)/2`, exactly what TorchScript export and o2o's evaluation do.
//! Each layer becomes the standard operators a runtime already has:
//!
//! | layer | ONNX nodes |
//! |---|---|
//! | `Standardize` | `Sub`, `Div` (float32) |
//! | `Standardize64` | `Cast` to double, `Sub`, `Div`, `Clip`, `Cast` to float (o2o computes it in float64) |
//! | `Dense` | `Gemm` |
//! | `LayerNorm` | `LayerNormalization` |
//! | ReLU / tanh / SiLU | `Relu` / `Tanh` / `Sigmoid` + `Mul` |
//! | `Clip` | `Clip` |
//! | `AppendBeta` | β as a column (the balance model's layers and map, a constant `Expand`ed to the batch, or the `beta` input `Unsqueeze`d), `Mul` by the frequencies, `Sin`, `Cos`, `Concat`, `Gather` to interleave them, `Concat` onto the row |

use super::proto::Message;
use o2o_agents::nn::{Activation, BetaMap, BetaSource, Layer, PolicyGraph};

/// The ONNX operator set the graph is written for (LayerNormalization needs 17).
pub const OPSET: i64 = 17;
/// ONNX IR version 8 (the version of the opset-17 release).
pub const IR_VERSION: i64 = 8;
/// Name of the observation input.
pub const OBSERVATION: &str = "observation";
/// Name of the β input, when there is one.
pub const BETA: &str = "beta";
/// Name of the action output.
pub const ACTION: &str = "action";
/// Name of the batch dimension.
const BATCH: &str = "batch";

// TensorProto.DataType values.
const FLOAT: i64 = 1;
const INT64: i64 = 7;
const DOUBLE: i64 = 11;

/// The ONNX model of `graph` followed by the clip to `[-1, 1]` and the rescaling to
/// `[low, high]`; `metadata` becomes the model's key–value metadata. `Err` names what does not
/// fit (a layer's width, bounds of another length than the actions).
pub fn model(graph: &PolicyGraph, low: &[f32], high: &[f32], metadata: &[(&str, String)]) -> Result<Vec<u8>, String> {
    let act_dim = graph.out_dim()?;
    if low.len() != act_dim || high.len() != act_dim {
        return Err(format!("the policy gives {act_dim} numbers per action, the env's bounds have {}", low.len()));
    }
    let mut g = Graph::default();
    let a = g.layers(OBSERVATION, &graph.layers, "")?;
    // a_env = low + (clip(a, −1, 1) + 1) · (high − low)/2, as the TorchScript module computes it.
    let a = g.clip(&a, -1.0, 1.0, "squash");
    let one = g.floats("rescale/one", &[], &[1.0]);
    let half_range: Vec<f32> = low.iter().zip(high).map(|(l, h)| 0.5 * (h - l)).collect();
    let half_range = g.floats("rescale/half_range", &[1, act_dim as i64], &half_range);
    let low = g.floats("rescale/low", &[1, act_dim as i64], low);
    let shifted = g.node("Add", &[&a, &one], vec![]);
    let scaled = g.node("Mul", &[&shifted, &half_range], vec![]);
    g.output(ACTION, "Add", &[&low, &scaled]);

    let mut inputs = vec![value_info(OBSERVATION, &[None, Some(graph.obs_dim as i64)])];
    if graph.takes_beta() {
        inputs.push(value_info(BETA, &[None]));
    }
    let mut body = Message::new();
    for node in &g.nodes {
        body = body.message(1, node);
    }
    body = body.string(2, "o2o_policy");
    for init in &g.initializers {
        body = body.message(5, init);
    }
    body = body.string(10, "o2o deterministic policy: observation normalization, actor, clip to [-1, 1], rescale");
    for input in &inputs {
        body = body.message(11, input);
    }
    body = body.message(12, &value_info(ACTION, &[None, Some(act_dim as i64)]));

    let mut m = Message::new()
        .int(1, IR_VERSION)
        .string(2, "o2o")
        .string(3, env!("CARGO_PKG_VERSION"))
        .message(7, &body)
        .message(8, &Message::new().string(1, "").int(2, OPSET));
    for (key, value) in metadata {
        m = m.message(14, &Message::new().string(1, key).string(2, value));
    }
    Ok(m.into_bytes())
}

/// `ValueInfoProto` of a float32 tensor; `None` dimensions are the symbolic batch size.
fn value_info(name: &str, dims: &[Option<i64>]) -> Message {
    let mut shape = Message::new();
    for d in dims {
        let dim = match d {
            Some(n) => Message::new().int(1, *n),
            None => Message::new().string(2, BATCH),
        };
        shape = shape.message(1, &dim);
    }
    let tensor = Message::new().int(1, FLOAT).message(2, &shape);
    Message::new().string(1, name).message(2, &Message::new().message(1, &tensor))
}

/// An `AttributeProto` holding one integer.
fn int_attr(name: &str, v: i64) -> Message {
    Message::new().string(1, name).int(3, v).int(20, 2)
}

/// An `AttributeProto` holding one float.
fn float_attr(name: &str, v: f32) -> Message {
    Message::new().string(1, name).float(2, v).int(20, 1)
}

/// Nodes and initializers as they are added; values are named `v0, v1, …` in order.
#[derive(Default)]
struct Graph {
    nodes: Vec<Message>,
    initializers: Vec<Message>,
}

impl Graph {
    /// A node `op(inputs)` with one output, whose name it returns.
    fn node(&mut self, op: &str, inputs: &[&str], attrs: Vec<Message>) -> String {
        let out = format!("v{}", self.nodes.len());
        self.add(op, inputs, &out, attrs);
        out
    }

    /// The node writing the graph output `name`.
    fn output(&mut self, name: &str, op: &str, inputs: &[&str]) {
        self.add(op, inputs, name, vec![]);
    }

    fn add(&mut self, op: &str, inputs: &[&str], out: &str, attrs: Vec<Message>) {
        let mut n = Message::new();
        for i in inputs {
            n = n.string(1, i);
        }
        n = n.string(2, out).string(3, &format!("{op}_{}", self.nodes.len())).string(4, op);
        for a in &attrs {
            n = n.message(5, a);
        }
        self.nodes.push(n);
    }

    /// An initializer of `dims` (row-major `raw`, `kind` a TensorProto data type); returns its name.
    fn constant(&mut self, name: &str, dims: &[i64], kind: i64, raw: Vec<u8>) -> String {
        let t = Message::new().packed_ints(1, dims).int(2, kind).string(8, name).bytes(9, &raw);
        self.initializers.push(t);
        name.to_string()
    }

    fn floats(&mut self, name: &str, dims: &[i64], v: &[f32]) -> String {
        self.constant(name, dims, FLOAT, v.iter().flat_map(|x| x.to_le_bytes()).collect())
    }

    fn doubles(&mut self, name: &str, dims: &[i64], v: &[f64]) -> String {
        self.constant(name, dims, DOUBLE, v.iter().flat_map(|x| x.to_le_bytes()).collect())
    }

    fn ints(&mut self, name: &str, dims: &[i64], v: &[i64]) -> String {
        self.constant(name, dims, INT64, v.iter().flat_map(|x| x.to_le_bytes()).collect())
    }

    /// `clip(x, low, high)` in float32, its bounds named under `prefix`.
    fn clip(&mut self, x: &str, low: f64, high: f64, prefix: &str) -> String {
        let lo = self.floats(&format!("{prefix}/low"), &[], &[low as f32]);
        let hi = self.floats(&format!("{prefix}/high"), &[], &[high as f32]);
        self.node("Clip", &[x, &lo, &hi], vec![])
    }

    /// `layers` applied to the value `x`; initializers are named `{prefix}layer{i}/…`.
    fn layers(&mut self, x: &str, layers: &[Layer], prefix: &str) -> Result<String, String> {
        let mut x = x.to_string();
        for (i, layer) in layers.iter().enumerate() {
            x = self.layer(&x, layer, &format!("{prefix}layer{i}"))?;
        }
        Ok(x)
    }

    fn layer(&mut self, x: &str, layer: &Layer, name: &str) -> Result<String, String> {
        let n = |v: &[f32]| [v.len() as i64];
        Ok(match layer {
            Layer::Standardize { mean, scale } => {
                let m = self.floats(&format!("{name}/mean"), &n(mean), mean);
                let s = self.floats(&format!("{name}/scale"), &n(scale), scale);
                let centred = self.node("Sub", &[x, &m], vec![]);
                self.node("Div", &[&centred, &s], vec![])
            }
            Layer::Standardize64 { mean, std, clip } => {
                let m = self.doubles(&format!("{name}/mean"), &[mean.len() as i64], mean);
                let s = self.doubles(&format!("{name}/std"), &[std.len() as i64], std);
                let wide = self.node("Cast", &[x], vec![int_attr("to", DOUBLE)]);
                let centred = self.node("Sub", &[&wide, &m], vec![]);
                let mut z = self.node("Div", &[&centred, &s], vec![]);
                if let Some(c) = clip {
                    let lo = self.doubles(&format!("{name}/clip_low"), &[], &[-c]);
                    let hi = self.doubles(&format!("{name}/clip_high"), &[], &[*c]);
                    z = self.node("Clip", &[&z, &lo, &hi], vec![]);
                }
                self.node("Cast", &[&z], vec![int_attr("to", FLOAT)])
            }
            Layer::Dense { weight, bias, fan_in, fan_out } => {
                let w = self.floats(&format!("{name}/weight"), &[*fan_in as i64, *fan_out as i64], weight);
                let b = self.floats(&format!("{name}/bias"), &n(bias), bias);
                self.node("Gemm", &[x, &w, &b], vec![])
            }
            Layer::LayerNorm { gain, bias, eps } => {
                let g = self.floats(&format!("{name}/gain"), &n(gain), gain);
                let b = self.floats(&format!("{name}/bias"), &n(bias), bias);
                let attrs = vec![int_attr("axis", -1), float_attr("epsilon", *eps as f32)];
                self.node("LayerNormalization", &[x, &g, &b], attrs)
            }
            Layer::Activation(Activation::Relu) => self.node("Relu", &[x], vec![]),
            Layer::Activation(Activation::Tanh) => self.node("Tanh", &[x], vec![]),
            Layer::Activation(Activation::Silu) => {
                let s = self.node("Sigmoid", &[x], vec![]);
                self.node("Mul", &[x, &s], vec![])
            }
            Layer::Clip { low, high } => self.clip(x, *low, *high, name),
            Layer::AppendBeta { encoding, beta } => {
                let column = self.beta_column(beta, name)?;
                // e(β): angles β·f_k [B, d/2], then [sin…, cos…] gathered into sin, cos pairs.
                let freqs = encoding.frequencies();
                let half = freqs.len() as i64;
                let f = self.floats(&format!("{name}/frequencies"), &[1, half], &freqs);
                let angle = self.node("Mul", &[&column, &f], vec![]);
                let sin = self.node("Sin", &[&angle], vec![]);
                let cos = self.node("Cos", &[&angle], vec![]);
                let both = self.node("Concat", &[&sin, &cos], vec![int_attr("axis", 1)]);
                let order: Vec<i64> = (0..half).flat_map(|k| [k, half + k]).collect();
                let order = self.ints(&format!("{name}/interleave"), &[2 * half], &order);
                let e = self.node("Gather", &[&both, &order], vec![int_attr("axis", 1)]);
                self.node("Concat", &[x, &e], vec![int_attr("axis", 1)])
            }
        })
    }

    /// β as a `[B, 1]` column.
    fn beta_column(&mut self, beta: &BetaSource, name: &str) -> Result<String, String> {
        Ok(match beta {
            BetaSource::Model { layers, range } => {
                // β = map(u(s)) on the observations, as BetaRange::beta computes it.
                let u = self.layers(OBSERVATION, layers, &format!("{name}/balance/"))?;
                let width = range.max - range.min;
                let (u, scale) = match range.map {
                    BetaMap::Paper => {
                        let one = self.floats(&format!("{name}/balance/one"), &[], &[1.0]);
                        (self.node("Add", &[&u, &one], vec![]), 0.5 * width)
                    }
                    BetaMap::Code => (u, width),
                };
                let scale = self.floats(&format!("{name}/balance/scale"), &[], &[scale as f32]);
                let offset = self.floats(&format!("{name}/balance/offset"), &[], &[range.min as f32]);
                let scaled = self.node("Mul", &[&u, &scale], vec![]);
                self.node("Add", &[&scaled, &offset], vec![])
            }
            BetaSource::Fixed(b) => {
                // [[β]] expanded to [B, 1], B read from the observations' shape.
                let value = self.floats(&format!("{name}/beta"), &[1, 1], &[*b as f32]);
                let shape = self.node("Shape", &[OBSERVATION], vec![]);
                let (zero, one) =
                    (self.ints(&format!("{name}/zero"), &[1], &[0]), self.ints(&format!("{name}/one"), &[1], &[1]));
                let rows = self.node("Slice", &[&shape, &zero, &one], vec![]);
                let target = self.node("Concat", &[&rows, &one], vec![int_attr("axis", 0)]);
                self.node("Expand", &[&value, &target], vec![])
            }
            BetaSource::Input => {
                let axes = self.ints(&format!("{name}/axes"), &[1], &[1]);
                self.node("Unsqueeze", &[BETA, &axes], vec![])
            }
        })
    }
}
