//! CQL's out-of-distribution term on a critic ensemble (Kumar et al., arXiv 2006.04779; its
//! variants Cal-QL and FamO2O-CQL): per member `i` and state `s`,
//!
//! `ood_i(s) = T log Σ_k exp((Q_i(s, a_k) − log q(a_k)) / T)`
//!
//! over `3N` sampled actions per state (N uniform on `[−1, 1]^|A|` with `log q = |A| log ½`, N from
//! `π(·|s)` and N from `π(·|s')` with `log q = log π`; importance-sampled), or without importance
//! sampling the log-mean-exp over those actions and the data action `a_D`,
//! `T log(1/(3N+1) Σ_k exp(Q_i(s, a_k) / T))`. A variant may floor the policy actions' Q-values
//! first, `Q(s, a_k) ← max(Q(s, a_k), f(s))` (Cal-QL's return-to-go).
//!
//! [`OodTerm::sum`] evaluates `c Σ_{i,s} ood_i(s)` and its gradient in the critic's weights a
//! chunk of states at a time, the gradient summed over chunks: the pass's activations
//! (`[E, B·3N, width]`, 15.7 MB per layer for 2 critics at B = 256, N = 10) then stay in cache,
//! where one pass over all rows runs its matmuls and elementwise passes from memory. On the CPU
//! each chunk runs the critic's taped pass and the log-sum-exp and its softmax gradient are
//! written out in one pass over the chunk's Q-values ([`ood_chunk_cpu`]); elsewhere autograd
//! differentiates [`ood_value`] (the reference).

use super::{EnsembleMlp, ParamSet};
use crate::rng::AgentRng;
use tch::{Kind, Tensor};

/// Critic rows per member in one chunk of the sampled-action pass.
pub(crate) const CHUNK_ROWS: i64 = 1024;

/// The 3N actions per state of the conservative term, drawn once for the whole batch: N uniform
/// on `[−1, 1]^|A|`, N from `π(·|s)` and N from `π(·|s')`, side by side per state (`[B·3N, A]`,
/// state-major), with the policy draws' log-probabilities (`[B, N]` each).
pub struct SampledActions {
    /// `[B·3N, A]`: per state, N uniform, N from π(·|s), N from π(·|s').
    pub actions: Tensor,
    /// log π(a|s) of the second group.
    pub logp_current: Tensor,
    /// log π(a|s') of the third group.
    pub logp_next: Tensor,
}

impl SampledActions {
    /// The three groups side by side per state, from `[B·N, A]` draws each (state-major) and the
    /// policy draws' `log π` `[B·N]`.
    pub fn new(rand: &Tensor, current: (Tensor, Tensor), next: (Tensor, Tensor), n: i64) -> Self {
        let rows = rand.size()[0] / n;
        let ((current, logp_current), (next, logp_next)) = (current, next);
        let actions =
            Tensor::stack(&[rand.view([rows, n, -1]), current.view([rows, n, -1]), next.view([rows, n, -1])], 1)
                .view([rows * 3 * n, -1]);
        SampledActions { actions, logp_current: logp_current.view([rows, n]), logp_next: logp_next.view([rows, n]) }
    }
}

/// Q-values of the sampled actions, each `[E, B, N]`, and the policy's log-probabilities `[B, N]`.
pub struct SampledQ {
    /// Q(s, a) for uniform a.
    pub rand: Tensor,
    /// Q(s, a) for a ~ π(·|s).
    pub current: Tensor,
    /// Q(s, a) for a ~ π(·|s').
    pub next: Tensor,
    /// log π(a|s) of the `current` actions.
    pub logp_current: Tensor,
    /// log π(a|s') of the `next` actions.
    pub logp_next: Tensor,
}

impl SampledQ {
    /// The groups of `q` `[E, len·3N]`, the Q-values of states `first .. first + len`.
    pub fn split(q: &Tensor, a: &SampledActions, first: i64, len: i64) -> Self {
        let n = a.logp_current.size()[1];
        let q = q.view([q.size()[0], len, 3, n]);
        SampledQ {
            rand: q.select(2, 0),
            current: q.select(2, 1),
            next: q.select(2, 2),
            logp_current: a.logp_current.narrow(0, first, len),
            logp_next: a.logp_next.narrow(0, first, len),
        }
    }

    /// The policy groups floored at the per-state `floor` `[B]`: `max(Q(s, a_k), f(s))`.
    fn floored(mut self, floor: &Tensor) -> Self {
        self.current = floor_at(&self.current, floor);
        self.next = floor_at(&self.next, floor);
        self
    }
}

/// `max(Q(s, a_k), f(s))`: `q` is `[E, B, N]`, `floor` `[B]`.
fn floor_at(q: &Tensor, floor: &Tensor) -> Tensor {
    q.maximum(&floor.view([1, -1, 1]))
}

/// How many entries of `q` (`[E, B, N]`) are below the per-state `floor` `[B]`.
fn below(q: &Tensor, floor: &Tensor) -> Tensor {
    q.lt_tensor(&floor.view([1, -1, 1])).sum(Kind::Float)
}

/// The out-of-distribution part of CQL's gap per member and state, `[E, B]` (the module doc's
/// `ood_i(s)`): importance-sampled, or the log-mean-exp with the data action a_D in the set.
/// `q_data` is `[E, B]`; the sampled Q-values are `[E, B, N]` (already floored, where a floor
/// applies).
pub fn ood_value(q_data: &Tensor, s: &SampledQ, act_dim: i64, temperature: f64, importance_sample: bool) -> Tensor {
    let cat = if importance_sample {
        let log_uniform = act_dim as f64 * 0.5f64.ln();
        Tensor::cat(
            &[&s.rand - log_uniform, &s.next - s.logp_next.unsqueeze(0), &s.current - s.logp_current.unsqueeze(0)],
            -1,
        )
    } else {
        Tensor::cat(
            &[s.rand.shallow_clone(), q_data.unsqueeze(-1), s.next.shallow_clone(), s.current.shallow_clone()],
            -1,
        )
    };
    let ood = (cat / temperature).logsumexp([-1], false) * temperature;
    if importance_sample {
        ood
    } else {
        let k = s.rand.size()[2] * 3 + 1;
        ood - temperature * (k as f64).ln()
    }
}

/// CQL's gap per member, `[E]`: `Δ_i = mean_b [ood_i(b) − Q_i(s, a_D)]` ([`ood_value`]).
pub fn conservative_gap(
    q_data: &Tensor,
    s: &SampledQ,
    act_dim: i64,
    temperature: f64,
    importance_sample: bool,
) -> Tensor {
    (ood_value(q_data, s, act_dim, temperature, importance_sample) - q_data).mean_dim(-1, false, Kind::Float)
}

/// The chunked out-of-distribution sum `c Σ_{i,s} ood_i(s)` of the critic ensemble, and how to
/// form it (the module doc).
pub(crate) struct OodTerm<'a> {
    /// The critic ensemble and its parameters (the gradient's order).
    pub critic: &'a EnsembleMlp,
    pub params: &'a ParamSet,
    /// |A|, for the uniform proposal's density.
    pub act_dim: i64,
    /// The log-sum-exp's temperature T.
    pub temperature: f64,
    /// Importance-sampled log-sum-exp (true) or log-mean-exp with the data action (false).
    pub importance_sample: bool,
    /// The per-state floor `f(s)` `[B]` under the policy actions' Q-values (Cal-QL), if any.
    pub floor: Option<&'a Tensor>,
    /// `c = scale · α'`: the scale, and α' `[]` held fixed (the Lagrange form), if any.
    pub scale: f64,
    pub alpha_prime: Option<&'a Tensor>,
    /// Critic rows per member in one chunk ([`CHUNK_ROWS`]).
    pub chunk_rows: i64,
}

/// What [`OodTerm::sum`] returns.
pub(crate) struct OodSum {
    /// `∂(c Σ_{i,s} ood_i(s))/∂θ` over the critic's parameters, in their order.
    pub grads: Vec<Tensor>,
    /// Without importance sampling, `∂(c Σ ood)/∂Q(s, a_D)` `[E, B]`: the data action's share, to
    /// be carried through the pass that computed `Q(s, a_D)`.
    pub q_data_grad: Option<Tensor>,
    /// `Σ_s ood_i(s)` per member, `[E]`, detached.
    pub per_member: Tensor,
    /// Σ Q of the uniform actions and Σ Q of π(·|s)'s (before the floor), and how many of the
    /// latter are below the floor.
    pub rand_sum: Tensor,
    pub policy_sum: Tensor,
    pub below: Tensor,
}

impl OodTerm<'_> {
    /// `c Σ_{i,s} ood_i(s)` and its gradient for the states `obs` `[B, obs]`, their sampled
    /// `actions` and the data actions' `Q(s, a_D)` `q_data` `[E, B]`: on the taped pass where it
    /// applies, else by autograd with the critic's dropout drawn from `rng`.
    pub fn sum(&self, obs: &Tensor, actions: &SampledActions, q_data: &Tensor, rng: &mut AgentRng) -> OodSum {
        self.sum_on(self.critic.tape_applies(obs), obs, actions, q_data, rng)
    }

    fn sum_on(&self, taped: bool, obs: &Tensor, a: &SampledActions, q_data: &Tensor, rng: &mut AgentRng) -> OodSum {
        let (n, is) = (a.logp_current.size()[1], self.importance_sample);
        let (e, rows) = (q_data.size()[0], q_data.size()[1]);
        let params = self.params.tensors();
        let mut grads: Vec<Tensor> = params.iter().map(|p| p.detach().zeros_like()).collect();
        // Without importance sampling a_D is in the set: its share of the gradient goes through
        // the data pass.
        let q_data_grad = (!is).then(|| q_data.detach().zeros_like());
        let mut per_member = Tensor::zeros([e], (Kind::Float, q_data.device()));
        let scalar = || Tensor::zeros([], (Kind::Float, q_data.device()));
        let (mut rand_sum, mut policy_sum, mut below_sum) = (scalar(), scalar(), scalar());
        let per_chunk = (self.chunk_rows / (3 * n)).max(1);
        // c per (member, state) of the out-of-distribution sum, as a number (the written-out path).
        let c = self.scale * self.alpha_prime.map_or(1.0, |a| a.double_value(&[]));
        let mut first = 0;
        while first < rows {
            let len = per_chunk.min(rows - first);
            let (obs, act) = (obs.narrow(0, first, len), a.actions.narrow(0, first * 3 * n, len * 3 * n));
            let qd = q_data.detach().narrow(1, first, len);
            let floor = self.floor.map(|g| g.narrow(0, first, len));
            let (chunk, ood, qd_grad) = if taped {
                // The critic's taped pass, the term's gradient in the Q-values written out.
                let (q, tape) = self.critic.forward_paired_taped(&obs, &act);
                let (logp_current, logp_next) =
                    (a.logp_current.narrow(0, first, len), a.logp_next.narrow(0, first, len));
                let o = ood_chunk_cpu(&q, &qd, &logp_current, &logp_next, floor.as_ref(), self, c);
                let _ = rand_sum.g_add_(&Tensor::from(o.rand_sum as f32));
                let _ = policy_sum.g_add_(&Tensor::from(o.policy_sum as f32));
                let _ = below_sum.g_add_(&Tensor::from(o.below as f32));
                (self.critic.backward_params(tape, &o.grad_q), o.value, o.grad_data)
            } else {
                let q = self.critic.forward_paired(&obs, &act, Some(&mut *rng)).squeeze_dim(-1);
                let mut s = SampledQ::split(&q, a, first, len);
                let _ = rand_sum.g_add_(&s.rand.detach().sum(Kind::Float));
                let _ = policy_sum.g_add_(&s.current.detach().sum(Kind::Float));
                if let Some(g) = &floor {
                    let _ = below_sum.g_add_(&below(&s.current.detach(), g));
                    s = s.floored(g);
                }
                let qd = if is { qd } else { qd.set_requires_grad(true) };
                let ood = ood_value(&qd, &s, self.act_dim, self.temperature, is);
                let mut loss = ood.sum(Kind::Float) * self.scale;
                if let Some(a) = self.alpha_prime {
                    loss = loss * a;
                }
                let mut inputs: Vec<&Tensor> = params.iter().collect();
                if !is {
                    inputs.push(&qd);
                }
                let mut chunk = Tensor::run_backward(&[&loss], &inputs, false, false);
                let qd_grad = if is { None } else { chunk.pop() };
                (chunk, ood.detach(), qd_grad)
            };
            tch::no_grad(|| {
                for (acc, g) in grads.iter_mut().zip(&chunk) {
                    let _ = acc.g_add_(g);
                }
                if let (Some(acc), Some(g)) = (&q_data_grad, &qd_grad) {
                    let _ = acc.narrow(1, first, len).g_add_(g);
                }
            });
            let _ = per_member.g_add_(&ood.sum_dim_intlist(&[1i64][..], false, Kind::Float));
            first += len;
        }
        OodSum { grads, q_data_grad, per_member, rand_sum, policy_sum, below: below_sum }
    }
}

/// One chunk's out-of-distribution part, written out (the taped CPU path).
struct OodChunk {
    /// [`ood_value`] per member and state, `[E, len]`.
    value: Tensor,
    /// `∂(c Σ ood)/∂Q` for the sampled Q-values, `[E, len·3N]` (their layout).
    grad_q: Tensor,
    /// The same for the data action's Q, `[E, len]` (without importance sampling only).
    grad_data: Option<Tensor>,
    /// Σ Q of the uniform actions, Σ Q of π(·|s)'s (before the floor), and how many of the
    /// latter are below the floor.
    rand_sum: f64,
    policy_sum: f64,
    below: f64,
}

/// [`ood_value`] and its gradient for one chunk, per member and state, in one pass over the
/// chunk's sampled Q-values `q` `[E, len·3N]` (state-major, groups uniform / π(·|s) / π(·|s')):
/// with `x_k` the terms of the log-sum-exp (the floor `max(Q, f)` on the policy's groups first),
/// `ood = T log Σ_k exp(x_k / T)` (minus `T log(3N + 1)` without importance sampling) and
/// `∂ood/∂x_k = softmax(x / T)_k`, so a loss `c Σ ood` has gradient `c · softmax_k` in each
/// sampled Q (zero where the floor binds) and in the data action's Q. The same function as the
/// autograd path ([`ood_value`] on floored values), without its dozen small ops per chunk; sums
/// are in f64.
fn ood_chunk_cpu(
    q: &Tensor,
    q_data: &Tensor,
    logp_current: &Tensor,
    logp_next: &Tensor,
    floor: Option<&Tensor>,
    form: &OodTerm<'_>,
    c: f64,
) -> OodChunk {
    let vec = |t: &Tensor| {
        Vec::<f32>::try_from(t.detach().contiguous().view([-1]).to_kind(Kind::Float)).expect("float tensor")
    };
    let (temperature, importance_sample) = (form.temperature, form.importance_sample);
    let (e, len) = (q_data.size()[0] as usize, q_data.size()[1] as usize);
    let n = logp_current.size()[1] as usize;
    let (qv, qd, lc, ln) = (vec(q), vec(q_data), vec(logp_current), vec(logp_next));
    let g = floor.map(vec);
    let log_uniform = form.act_dim as f64 * 0.5f64.ln();
    let terms = 3 * n + usize::from(!importance_sample);
    let shift = if importance_sample { 0.0 } else { temperature * (terms as f64).ln() };
    let (mut value, mut grad_q, mut grad_data) =
        (vec![0f32; e * len], vec![0f32; e * len * 3 * n], vec![0f32; e * len]);
    let (mut rand_sum, mut policy_sum, mut below) = (0.0, 0.0, 0.0);
    let mut x = vec![0f64; terms];
    let mut live = vec![true; terms];
    for i in 0..e {
        for s in 0..len {
            let row = &qv[(i * len + s) * 3 * n..][..3 * n];
            for k in 0..3 * n {
                let (group, j) = (k / n, k % n);
                let mut v = row[k] as f64;
                match group {
                    0 => rand_sum += v,
                    1 => policy_sum += v,
                    _ => {}
                }
                live[k] = true;
                if let (Some(g), 1 | 2) = (&g, group) {
                    let floor = g[s] as f64;
                    if group == 1 && v < floor {
                        below += 1.0;
                    }
                    if v < floor {
                        v = floor;
                        live[k] = false;
                    }
                }
                x[k] = match (importance_sample, group) {
                    (false, _) => v,
                    (true, 0) => v - log_uniform,
                    (true, 1) => v - lc[s * n + j] as f64,
                    (true, _) => v - ln[s * n + j] as f64,
                };
            }
            if !importance_sample {
                x[3 * n] = qd[i * len + s] as f64;
            }
            let m = x.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b / temperature));
            let total: f64 = x.iter().map(|&v| (v / temperature - m).exp()).sum();
            value[i * len + s] = (temperature * (m + total.ln()) - shift) as f32;
            let out = &mut grad_q[(i * len + s) * 3 * n..][..3 * n];
            for k in 0..3 * n {
                out[k] = if live[k] { (c * (x[k] / temperature - m).exp() / total) as f32 } else { 0.0 };
            }
            if !importance_sample {
                grad_data[i * len + s] = (c * (x[3 * n] / temperature - m).exp() / total) as f32;
            }
        }
    }
    let t = |v: Vec<f32>, shape: &[i64]| Tensor::from_slice(&v).view(shape);
    OodChunk {
        value: t(value, &[e as i64, len as i64]),
        grad_q: t(grad_q, &[e as i64, (len * 3 * n) as i64]),
        grad_data: (!importance_sample).then(|| t(grad_data, &[e as i64, len as i64])),
        rand_sum,
        policy_sum,
        below,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::critic::critic_and_target;
    use crate::nn::MlpConfig;
    use tch::Device;

    fn t(v: &[f32], shape: &[i64]) -> Tensor {
        Tensor::from_slice(v).view(shape)
    }

    /// Δ on a 1-member, 1-state, N = 1 example, against the formula evaluated by hand.
    #[test]
    fn gap_matches_hand_computed_values() {
        let s = SampledQ {
            rand: t(&[1.0], &[1, 1, 1]),
            current: t(&[2.0], &[1, 1, 1]),
            next: t(&[0.5], &[1, 1, 1]),
            logp_current: t(&[-1.0], &[1, 1]),
            logp_next: t(&[0.3], &[1, 1]),
        };
        let q_data = t(&[1.5], &[1, 1]);
        // Importance-sampled, |A| = 2: terms 1 − 2 ln ½, 0.5 − 0.3, 2 + 1.
        let terms = [1.0 - 2.0 * 0.5f64.ln(), 0.5 - 0.3, 3.0];
        let want = terms.iter().map(|x| x.exp()).sum::<f64>().ln() - 1.5;
        let got = conservative_gap(&q_data, &s, 2, 1.0, true).double_value(&[0]);
        assert!((got - want).abs() < 1e-5, "{got} vs {want}");
        // Temperature 2: T log Σ exp(x / T).
        let want_t = 2.0 * terms.iter().map(|x| (x / 2.0).exp()).sum::<f64>().ln() - 1.5;
        assert!((conservative_gap(&q_data, &s, 2, 2.0, true).double_value(&[0]) - want_t).abs() < 1e-5);
        // Without importance sampling: log-mean-exp over {1, 1.5, 0.5, 2}.
        let want_n = ([1.0f64, 1.5, 0.5, 2.0].iter().map(|x| x.exp()).sum::<f64>() / 4.0).ln() - 1.5;
        assert!((conservative_gap(&q_data, &s, 2, 1.0, false).double_value(&[0]) - want_n).abs() < 1e-5);
        // Equal Q everywhere and no importance weights: the log-mean-exp gap is exactly 0.
        let flat =
            SampledQ { rand: t(&[1.5], &[1, 1, 1]), current: t(&[1.5], &[1, 1, 1]), next: t(&[1.5], &[1, 1, 1]), ..s };
        assert!(conservative_gap(&q_data, &flat, 2, 1.0, false).double_value(&[0]).abs() < 1e-6);
    }

    #[test]
    fn floor_binds_only_below_the_floor() {
        let q = Tensor::from_slice(&[1.0f32, 3.0, -2.0, 0.5]).view([1, 2, 2]);
        let g = Tensor::from_slice(&[2.0f32, f32::NEG_INFINITY]);
        let f = Vec::<f32>::try_from(floor_at(&q, &g).flatten(0, -1)).unwrap();
        assert_eq!(f, vec![2.0, 3.0, -2.0, 0.5]);
        assert_eq!(below(&q, &g).double_value(&[]), 1.0);
    }

    /// The chunked sum on the taped pass and on the autograd pass has the value and the critic
    /// gradient of the whole-batch formula (`ood_value` on one pass over every state's sampled
    /// actions), with and without importance sampling, a floor and α'.
    #[test]
    fn taped_and_autograd_chunks_match_the_whole_batch_formula() {
        let mut rng = AgentRng::new(4);
        let (rows, n, act_dim) = (7i64, 3i64, 2i64);
        let cfg = MlpConfig { hidden: vec![16, 16], ..MlpConfig::default() };
        let (trained, _) = critic_and_target(2, 3 + act_dim, &cfg, 3e-4, &mut rng, Device::Cpu);
        let (critic, params) = (&trained.net, &trained.params);
        let obs = rng.normal(&[rows, 3], Device::Cpu);
        let rand = rng.uniform_tensor(&[rows * n, act_dim], Device::Cpu) * 2.0 - 1.0;
        let draw = |rng: &mut AgentRng| {
            (rng.normal(&[rows * n, act_dim], Device::Cpu).tanh(), rng.normal(&[rows * n], Device::Cpu))
        };
        let actions = SampledActions::new(&rand, draw(&mut rng), draw(&mut rng), n);
        let q_data = critic.forward(&Tensor::cat(&[&obs, &rng.normal(&[rows, act_dim], Device::Cpu)], 1), None);
        let q_data = q_data.squeeze_dim(-1).detach();
        let g = rng.normal(&[rows], Device::Cpu) * 0.3;
        let alpha_prime = Tensor::from(1.7f32);
        for (is, floor, lagrange) in
            [(true, false, false), (true, true, false), (false, false, false), (false, true, true)]
        {
            let term = |chunk_rows| OodTerm {
                critic,
                params,
                act_dim,
                temperature: 1.3,
                importance_sample: is,
                floor: floor.then_some(&g),
                scale: 0.25,
                alpha_prime: lagrange.then_some(&alpha_prime),
                chunk_rows,
            };
            // Reference: one pass, the formula as written, differentiated by autograd.
            let qd = q_data.set_requires_grad(true);
            let mut s = SampledQ::split(
                &critic.forward_paired(&obs, &actions.actions, None).squeeze_dim(-1),
                &actions,
                0,
                rows,
            );
            if floor {
                s = s.floored(&g);
            }
            let ood = ood_value(&qd, &s, act_dim, 1.3, is);
            let want_sum = ood.sum_dim_intlist(&[1i64][..], false, Kind::Float).detach();
            let c = if lagrange { 0.25 * 1.7 } else { 0.25 };
            let mut inputs: Vec<Tensor> = params.tensors();
            inputs.push(qd.shallow_clone());
            let want = Tensor::run_backward(&[ood.sum(Kind::Float) * c], &inputs, false, false);
            for (chunk_rows, taped) in [(9, true), (27, true), (1024, true), (9, false), (1024, false)] {
                let got = term(chunk_rows).sum_on(taped, &obs, &actions, &q_data, &mut AgentRng::new(0));
                let what = format!("chunk {chunk_rows}, taped {taped}, is {is}, floor {floor}, α' {lagrange}");
                assert!((&got.per_member - &want_sum).abs().max().double_value(&[]) < 1e-4, "sum, {what}");
                for (g, w) in got.grads.iter().zip(&want) {
                    let err = (g - w).abs().max().double_value(&[]);
                    assert!(err < 1e-5 * (1.0 + w.abs().max().double_value(&[])), "gradient, {what}: {err}");
                }
                match &got.q_data_grad {
                    Some(d) => assert!((d - &want[want.len() - 1]).abs().max().double_value(&[]) < 1e-5, "{what}"),
                    None => assert!(is, "{what}"),
                }
            }
        }
    }
}
