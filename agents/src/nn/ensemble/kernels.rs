//! The fused row passes of the taped ensemble ([`super::tape`]): plain loops over contiguous
//! float32 rows `[E, R, W]` (member-major), one pass per hidden layer forward and one backward.
//! Each function is compiled twice, for baseline x86-64 and for AVX2, and picks at run time.
//!
//! Forward, per member `e` and row `r` (`z` is the layer's matmul output `x W_e`):
//! `z += b_e (+ p_e[r / k])`, then with LayerNorm `μ, σ² = mean, var(z)`, `ρ = 1/√(σ² + 1e-5)`,
//! `x̂ = (z − μ) ρ`, `h = relu(γ_e x̂ + β_e)`; without it `h = relu(z)` in place. With the
//! one-output head fused in, `q = h · w_e + c_e`.
//!
//! Backward, given `g = ∂L/∂h` (or `g = ∂L/∂q · w_e` from the fused head), per row:
//! `g_y = g · [h > 0]`; with LayerNorm `∂γ += g_y x̂`, `∂β += g_y`, `g_x̂ = g_y γ`,
//! `g_z = ρ (g_x̂ − mean(g_x̂) − x̂ mean(g_x̂ x̂))`; without it `g_z = g_y`; `∂b += g_z`; with the
//! head `∂w_e += ∂q h`, `∂c_e += ∂q`; and for a paired first layer the per-state sums of `g_z`.

/// LayerNorm's ε (libtorch's and flax's default).
pub(super) const LN_EPS: f32 = 1e-5;

/// Sizes of one layer's activations `[members, rows, width]`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Dims {
    pub members: usize,
    pub rows: usize,
    pub width: usize,
}

/// LayerNorm's parameters and outputs in the forward pass.
pub(super) struct NormForward<'a> {
    /// γ, `[E, W]`.
    pub gain: &'a [f32],
    /// β, `[E, W]`.
    pub shift: &'a [f32],
    /// `(μ, ρ)` per row, `[E, R, 2]` (written).
    pub stats: &'a mut [f32],
    /// `h`, `[E, R, W]` (written; `z` keeps the pre-normalization values).
    pub out: &'a mut [f32],
}

/// The one-output head fused into the last hidden layer.
pub(super) struct HeadForward<'a> {
    /// `w`, `[E, W]`.
    pub weight: &'a [f32],
    /// `c`, `[E]`.
    pub bias: &'a [f32],
    /// `q`, `[E, R]` (written).
    pub q: &'a mut [f32],
}

/// One hidden layer's forward pass.
pub(super) struct Forward<'a> {
    pub dims: Dims,
    /// The matmul output on entry; on exit `z + b (+ p)` (LayerNorm) or `h` (without it).
    pub z: &'a mut [f32],
    /// `b`, `[E, W]`.
    pub bias: &'a [f32],
    /// Per-state addend `p` `[E, R / k, W]` and `k` (a paired first layer's `s W_s`).
    pub per_state: Option<(&'a [f32], usize)>,
    pub norm: Option<NormForward<'a>>,
    pub head: Option<HeadForward<'a>>,
}

/// LayerNorm's saved values and gradient accumulators in the backward pass.
pub(super) struct NormBackward<'a> {
    /// `z + b (+ p)` from the forward pass, `[E, R, W]`.
    pub z: &'a [f32],
    /// `(μ, ρ)` per row, `[E, R, 2]`.
    pub stats: &'a [f32],
    /// γ, `[E, W]`.
    pub gain: &'a [f32],
    /// `∂γ`, `[E, W]` (accumulated).
    pub grad_gain: &'a mut [f32],
    /// `∂β`, `[E, W]` (accumulated).
    pub grad_shift: &'a mut [f32],
}

/// Where `∂L/∂h` comes from.
pub(super) enum GradIn<'a> {
    /// A buffer `[E, R, W]`, overwritten with `g_z`.
    InPlace(&'a mut [f32]),
    /// The fused one-output head: `∂L/∂h = ∂q · w_e`; `g_z` is written to `out`, and the
    /// head's gradients are accumulated.
    Head { grad_q: &'a [f32], weight: &'a [f32], out: &'a mut [f32], grad_weight: &'a mut [f32], grad_bias: &'a mut [f32] },
}

/// One hidden layer's backward pass.
pub(super) struct Backward<'a> {
    pub dims: Dims,
    pub grad: GradIn<'a>,
    /// `h` from the forward pass, `[E, R, W]`.
    pub h: &'a [f32],
    pub norm: Option<NormBackward<'a>>,
    /// `∂b`, `[E, W]` (accumulated).
    pub grad_bias: &'a mut [f32],
    /// Per-state sums of `g_z`, `[E, R / k, W]` (accumulated), and `k`.
    pub per_state: Option<(&'a mut [f32], usize)>,
}

/// Run the forward pass (AVX2 where the CPU has it), its members split over `threads`.
pub(super) fn forward(f: Forward<'_>, threads: usize) {
    let dims = f.dims;
    crate::nn::team::run(split_members(f, dims, threads, Forward::split), forward_one);
}

/// Run the backward pass (AVX2 where the CPU has it), its members split over `threads`.
pub(super) fn backward(b: Backward<'_>, threads: usize) {
    let dims = b.dims;
    crate::nn::team::run(split_members(b, dims, threads, Backward::split), backward_one);
}

/// A pass as `parts(dims, threads)` passes over consecutive groups of members.
fn split_members<T>(pass: T, dims: Dims, threads: usize, split: fn(T, usize) -> (T, T)) -> Vec<T> {
    let parts = parts(dims, threads);
    let (mut pieces, mut rest, mut members) = (Vec::with_capacity(parts), pass, dims.members);
    while pieces.len() + 1 < parts {
        let at = members / (parts - pieces.len());
        let (a, b) = split(rest, at);
        pieces.push(a);
        (rest, members) = (b, members - at);
    }
    pieces.push(rest);
    pieces
}

/// Below this many activations a pass stays on one thread.
const PARALLEL_MIN: usize = 1 << 15;

fn parts(d: Dims, threads: usize) -> usize {
    if d.members * d.rows * d.width < PARALLEL_MIN || !crate::nn::team::available() {
        1
    } else {
        threads.min(d.members).max(1)
    }
}

fn forward_one(f: Forward<'_>) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU was just checked for AVX2.
        return unsafe { forward_avx2(f) };
    }
    forward_rows(f)
}

fn backward_one(b: Backward<'_>) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU was just checked for AVX2.
        return unsafe { backward_avx2(b) };
    }
    backward_rows(b)
}

/// Split a member-major slice of `per` values per member after `cut` members.
fn cut_mut<T>(x: &mut [T], per: usize, cut: usize) -> (&mut [T], &mut [T]) {
    x.split_at_mut(per * cut)
}

fn cut<T>(x: &[T], per: usize, cut: usize) -> (&[T], &[T]) {
    x.split_at(per * cut)
}

impl<'a> Forward<'a> {
    /// Members `..cut` and `cut..` as two independent passes (every buffer is member-major).
    fn split(self, at: usize) -> (Forward<'a>, Forward<'a>) {
        let Dims { members, rows, width: w } = self.dims;
        let (d1, d2) = (Dims { members: at, ..self.dims }, Dims { members: members - at, ..self.dims });
        let (z1, z2) = cut_mut(self.z, rows * w, at);
        let (b1, b2) = cut(self.bias, w, at);
        let (p1, p2) = match self.per_state {
            Some((p, k)) => {
                let (x, y) = cut(p, rows / k * w, at);
                (Some((x, k)), Some((y, k)))
            }
            None => (None, None),
        };
        let (n1, n2) = match self.norm {
            Some(n) => {
                let (g1, g2) = cut(n.gain, w, at);
                let (s1, s2) = cut(n.shift, w, at);
                let (t1, t2) = cut_mut(n.stats, rows * 2, at);
                let (o1, o2) = cut_mut(n.out, rows * w, at);
                (Some(NormForward { gain: g1, shift: s1, stats: t1, out: o1 }), Some(NormForward { gain: g2, shift: s2, stats: t2, out: o2 }))
            }
            None => (None, None),
        };
        let (h1, h2) = match self.head {
            Some(h) => {
                let (w1, w2) = cut(h.weight, w, at);
                let (c1, c2) = cut(h.bias, 1, at);
                let (q1, q2) = cut_mut(h.q, rows, at);
                (Some(HeadForward { weight: w1, bias: c1, q: q1 }), Some(HeadForward { weight: w2, bias: c2, q: q2 }))
            }
            None => (None, None),
        };
        (Forward { dims: d1, z: z1, bias: b1, per_state: p1, norm: n1, head: h1 }, Forward { dims: d2, z: z2, bias: b2, per_state: p2, norm: n2, head: h2 })
    }
}

impl<'a> Backward<'a> {
    /// Members `..cut` and `cut..` as two independent passes (every buffer is member-major).
    fn split(self, at: usize) -> (Backward<'a>, Backward<'a>) {
        let Dims { members, rows, width: w } = self.dims;
        let (d1, d2) = (Dims { members: at, ..self.dims }, Dims { members: members - at, ..self.dims });
        let (g1, g2) = match self.grad {
            GradIn::InPlace(buf) => {
                let (x, y) = cut_mut(buf, rows * w, at);
                (GradIn::InPlace(x), GradIn::InPlace(y))
            }
            GradIn::Head { grad_q, weight, out, grad_weight, grad_bias } => {
                let (q1, q2) = cut(grad_q, rows, at);
                let (w1, w2) = cut(weight, w, at);
                let (o1, o2) = cut_mut(out, rows * w, at);
                let (gw1, gw2) = cut_mut(grad_weight, w, at);
                let (gb1, gb2) = cut_mut(grad_bias, 1, at);
                (GradIn::Head { grad_q: q1, weight: w1, out: o1, grad_weight: gw1, grad_bias: gb1 }, GradIn::Head { grad_q: q2, weight: w2, out: o2, grad_weight: gw2, grad_bias: gb2 })
            }
        };
        let (h1, h2) = cut(self.h, rows * w, at);
        let (n1, n2) = match self.norm {
            Some(n) => {
                let (z1, z2) = cut(n.z, rows * w, at);
                let (t1, t2) = cut(n.stats, rows * 2, at);
                let (ga1, ga2) = cut(n.gain, w, at);
                let (gg1, gg2) = cut_mut(n.grad_gain, w, at);
                let (gs1, gs2) = cut_mut(n.grad_shift, w, at);
                (Some(NormBackward { z: z1, stats: t1, gain: ga1, grad_gain: gg1, grad_shift: gs1 }), Some(NormBackward { z: z2, stats: t2, gain: ga2, grad_gain: gg2, grad_shift: gs2 }))
            }
            None => (None, None),
        };
        let (b1, b2) = cut_mut(self.grad_bias, w, at);
        let (p1, p2) = match self.per_state {
            Some((p, k)) => {
                let (x, y) = cut_mut(p, rows / k * w, at);
                (Some((x, k)), Some((y, k)))
            }
            None => (None, None),
        };
        (Backward { dims: d1, grad: g1, h: h1, norm: n1, grad_bias: b1, per_state: p1 }, Backward { dims: d2, grad: g2, h: h2, norm: n2, grad_bias: b2, per_state: p2 })
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn forward_avx2(f: Forward<'_>) {
    forward_rows(f)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn backward_avx2(b: Backward<'_>) {
    backward_rows(b)
}

/// `g · [h > 0]` as a product with 1 or 0. Written as a select (or a bit mask), LLVM emits a
/// masked store of zeros (`vmaskmovps`), which is microcoded and slow on AMD Zen; the product
/// is a compare, an `and` and a multiply. (It differs from a select only for a non-finite `g`.)
#[inline(always)]
fn relu_mask(g: f32, h: f32) -> f32 {
    g * ((h > 0.0) as u32 as f32)
}

/// `Σ x` in eight lanes (one AVX register; a fixed order, so the result is reproducible).
#[inline(always)]
fn sum(x: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let chunks = x.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().sum();
    for c in chunks {
        for i in 0..8 {
            acc[i] += c[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `Σ x y` in eight lanes.
#[inline(always)]
fn dot(x: &[f32], y: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (cx, cy) = (x.chunks_exact(8), y.chunks_exact(8));
    let tail: f32 = cx.remainder().iter().zip(cy.remainder()).map(|(a, b)| a * b).sum();
    for (a, b) in cx.zip(cy) {
        for i in 0..8 {
            acc[i] += a[i] * b[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `Σ g (z − μ)` in eight lanes.
#[inline(always)]
fn centered_dot(g: &[f32], z: &[f32], mu: f32) -> f32 {
    let mut acc = [0f32; 8];
    let (cg, cz) = (g.chunks_exact(8), z.chunks_exact(8));
    let tail: f32 = cg.remainder().iter().zip(cz.remainder()).map(|(a, b)| a * (b - mu)).sum();
    for (a, b) in cg.zip(cz) {
        for i in 0..8 {
            acc[i] += a[i] * (b[i] - mu);
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `Σ (x − μ)²` in eight lanes.
#[inline(always)]
fn centered_square_sum(x: &[f32], mu: f32) -> f32 {
    let mut acc = [0f32; 8];
    let chunks = x.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().map(|v| (v - mu) * (v - mu)).sum();
    for c in chunks {
        for i in 0..8 {
            let d = c[i] - mu;
            acc[i] += d * d;
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[inline(always)]
fn forward_rows(f: Forward<'_>) {
    let Dims { members, rows, width: w } = f.dims;
    let Forward { z, bias, per_state, mut norm, mut head, .. } = f;
    for e in 0..members {
        let b = &bias[e * w..][..w];
        for r in 0..rows {
            let i = e * rows + r;
            let row = &mut z[i * w..][..w];
            if let Some((p, k)) = per_state {
                let p = &p[(e * (rows / k) + r / k) * w..][..w];
                for (v, pj) in row.iter_mut().zip(p) {
                    *v += pj;
                }
            }
            let h: &[f32] = match norm.as_mut() {
                Some(n) => {
                    // (Adding b inside the sum's loop measured slower than two passes.)
                    for (v, bj) in row.iter_mut().zip(b) {
                        *v += bj;
                    }
                    let mu = sum(row) / w as f32;
                    let rho = 1.0 / (centered_square_sum(row, mu) / w as f32 + LN_EPS).sqrt();
                    n.stats[2 * i] = mu;
                    n.stats[2 * i + 1] = rho;
                    let (g, s) = (&n.gain[e * w..][..w], &n.shift[e * w..][..w]);
                    let out = &mut n.out[i * w..][..w];
                    for (((o, v), gj), sj) in out.iter_mut().zip(row.iter()).zip(g).zip(s) {
                        *o = (gj * ((v - mu) * rho) + sj).max(0.0);
                    }
                    out
                }
                None => {
                    for (v, bj) in row.iter_mut().zip(b) {
                        *v = (*v + bj).max(0.0);
                    }
                    row
                }
            };
            if let Some(hd) = head.as_mut() {
                hd.q[i] = dot(h, &hd.weight[e * w..][..w]) + hd.bias[e];
            }
        }
    }
}

#[inline(always)]
fn backward_rows(b: Backward<'_>) {
    let Dims { members, rows, width: w } = b.dims;
    let Backward { mut grad, h, mut norm, grad_bias, mut per_state, .. } = b;
    for e in 0..members {
        for r in 0..rows {
            let i = e * rows + r;
            let hr = &h[i * w..][..w];
            // g ← g_y = ∂L/∂h · [h > 0] (from the buffer, or ∂q · w_e from the fused head, whose
            // gradients are accumulated on the way).
            let g: &mut [f32] = match &mut grad {
                GradIn::InPlace(buf) => {
                    let g = &mut buf[i * w..][..w];
                    // With LayerNorm the mask is applied in its first pass below.
                    if norm.is_none() {
                        for (gj, hj) in g.iter_mut().zip(hr) {
                            *gj = relu_mask(*gj, *hj);
                        }
                    }
                    g
                }
                GradIn::Head { grad_q, weight, out, grad_weight, grad_bias } => {
                    let dq = grad_q[i];
                    let (wt, gw) = (&weight[e * w..][..w], &mut grad_weight[e * w..][..w]);
                    let g = &mut out[i * w..][..w];
                    for (((gj, gwj), hj), wj) in g.iter_mut().zip(gw.iter_mut()).zip(hr).zip(wt) {
                        *gwj += dq * hj;
                        *gj = relu_mask(dq * wj, *hj);
                    }
                    grad_bias[e] += dq;
                    g
                }
            };
            let gb = &mut grad_bias[e * w..][..w];
            match norm.as_mut() {
                Some(n) => {
                    let (mu, rho) = (n.stats[2 * i], n.stats[2 * i + 1]);
                    let zr = &n.z[i * w..][..w];
                    let gain = &n.gain[e * w..][..w];
                    let (gg, gs) = (&mut n.grad_gain[e * w..][..w], &mut n.grad_shift[e * w..][..w]);
                    // g_y = g · [h > 0] (again, for the head's g: the mask is idempotent);
                    // ∂γ += g_y x̂, ∂β += g_y; then g holds g_x̂ = g_y γ.
                    for (((((gj, hj), zj), ggj), gsj), gaj) in g.iter_mut().zip(hr).zip(zr).zip(gg.iter_mut()).zip(gs.iter_mut()).zip(gain) {
                        let gy = relu_mask(*gj, *hj);
                        let xh = (zj - mu) * rho;
                        *ggj += gy * xh;
                        *gsj += gy;
                        *gj = gy * gaj;
                    }
                    // g_z = ρ (g_x̂ − mean(g_x̂) − x̂ mean(g_x̂ x̂)).
                    let m1 = sum(g) / w as f32;
                    let m2 = centered_dot(g, zr, mu) * rho / w as f32;
                    for ((gj, zj), gbj) in g.iter_mut().zip(zr).zip(gb.iter_mut()) {
                        let xh = (zj - mu) * rho;
                        *gj = rho * (*gj - m1 - xh * m2);
                        *gbj += *gj;
                    }
                }
                None => {
                    for (gbj, gj) in gb.iter_mut().zip(g.iter()) {
                        *gbj += gj;
                    }
                }
            }
            if let Some((ps, k)) = per_state.as_mut() {
                let p = &mut ps[(e * (rows / *k) + r / *k) * w..][..w];
                for (pj, gj) in p.iter_mut().zip(g.iter()) {
                    *pj += gj;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, seed: usize) -> Vec<f32> {
        (0..n).map(|i| ((i * 7919 + seed * 104_729) % 2001) as f32 / 1000.0 - 1.0).collect()
    }

    /// Split over two threads of libtorch's team, a pass computes exactly what one thread does
    /// (each member is one thread's, in the same order), forward and backward, with LayerNorm,
    /// the fused head and per-state sums.
    #[test]
    fn a_pass_split_over_threads_equals_one_thread() {
        let (e, r, w, k) = (3usize, 64usize, 200usize, 4usize);
        assert!(e * r * w >= PARALLEL_MIN);
        let n = e * r * w;
        let run = |threads: usize| {
            let mut z = data(n, 1);
            let (bias, gain, shift, head_w, head_b, ps) = (data(e * w, 2), data(e * w, 3), data(e * w, 4), data(e * w, 5), data(e, 6), data(e * r / k * w, 7));
            let (mut stats, mut out, mut q) = (vec![0f32; 2 * e * r], vec![0f32; n], vec![0f32; e * r]);
            let dims = Dims { members: e, rows: r, width: w };
            forward(
                Forward {
                    dims,
                    z: &mut z,
                    bias: &bias,
                    per_state: Some((&ps, k)),
                    norm: Some(NormForward { gain: &gain, shift: &shift, stats: &mut stats, out: &mut out }),
                    head: Some(HeadForward { weight: &head_w, bias: &head_b, q: &mut q }),
                },
                threads,
            );
            let grad_q = data(e * r, 8);
            let (mut gz, mut gw, mut gb_head, mut gb, mut gg, mut gs, mut sums) = (vec![0f32; n], vec![0f32; e * w], vec![0f32; e], vec![0f32; e * w], vec![0f32; e * w], vec![0f32; e * w], vec![0f32; e * r / k * w]);
            backward(
                Backward {
                    dims,
                    grad: GradIn::Head { grad_q: &grad_q, weight: &head_w, out: &mut gz, grad_weight: &mut gw, grad_bias: &mut gb_head },
                    h: &out,
                    norm: Some(NormBackward { z: &z, stats: &stats, gain: &gain, grad_gain: &mut gg, grad_shift: &mut gs }),
                    grad_bias: &mut gb,
                    per_state: Some((&mut sums, k)),
                },
                threads,
            );
            // And an in-place layer without LayerNorm on the result.
            let mut g2 = gz.clone();
            let mut gb2 = vec![0f32; e * w];
            backward(Backward { dims, grad: GradIn::InPlace(&mut g2), h: &out, norm: None, grad_bias: &mut gb2, per_state: None }, threads);
            vec![z, stats, out, q, gz, gw, gb_head, gb, gg, gs, sums, g2, gb2]
        };
        let (one, two) = (run(1), run(2));
        assert!(one[3].iter().all(|v| v.is_finite()) && one[4].iter().any(|v| *v != 0.0));
        assert!(one == two, "the 2-thread pass differs from the 1-thread pass");
    }
}
