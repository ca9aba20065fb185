//! A hidden layer's bias and SiLU (Swish) fused into one pass over its rows, forward and
//! backward, on float32 CPU buffers `[E, R, W]` (member-major): the dynamics ensemble's hidden
//! layers (`crate::unio4::dynamics`), where autograd would run the bias, the SiLU and each of
//! their backward steps as separate passes over the activations.
//!
//! Forward, per member `e`, row `r` and unit `j` of the layer's matmul output `z = x W_e`:
//! `z ← z + b_e`, `σ = 1 / (1 + e^{−z})`, `h = z σ`; the `z` buffer is overwritten with `σ`
//! and `h` is written. Backward, given `g = ∂L/∂h` in place: `g_z = g (σ + h (1 − σ))` — the
//! derivative `σ (1 + z (1 − σ))` written with `h = z σ` — and `∂b_e += Σ_r g_z[e, r]`.
//!
//! `e^x` is Cephes' single-precision polynomial (relative error about 1e-7 on the clamped range
//! [−87.3, 88.3]) in plain float and integer operations, so LLVM vectorizes the loops (for
//! AVX-512, AVX2 or the baseline, whichever the CPU has) and every build gives the same bits (no
//! fused multiply-adds are formed). Members
//! are split over libtorch's threads whole, so each `∂b` sum runs in one order whatever the
//! thread count.

use tch::{Device, Kind, Tensor};

/// `log₂ e`.
const LOG2E: f32 = std::f32::consts::LOG2_E;
/// `ln 2` split in two (Cody–Waite), so `x − k ln 2` keeps its low bits.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// `1.5 · 2²³`: adding it rounds a float of magnitude below 2²² to an integer, held in the
/// low mantissa bits.
const ROUND: f32 = 12_582_912.0;
/// Cephes `expf`'s polynomial for `e^r − 1 − r` over `r²`, `|r| ≤ ln 2 / 2`.
const P: [f32; 6] = [1.987_569_1e-4, 1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 0.166_666_65, 0.5];

/// `e^x` for any finite `x` (clamped to [−87.3, 88.3], where `e^x` is a normal float).
#[inline(always)]
fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.3, 88.3);
    // k = round(x log₂ e), as a float and (in the low bits of `t`) as an integer.
    let t = x * LOG2E + ROUND;
    let k = t - ROUND;
    let r = (x - k * LN2_HI) - k * LN2_LO;
    let p = ((((P[0] * r + P[1]) * r + P[2]) * r + P[3]) * r + P[4]) * r + P[5];
    let e = p * (r * r) + r + 1.0;
    // 2^k from its exponent bits: k + 127 in bits 23..31.
    let scale = f32::from_bits(t.to_bits().wrapping_sub(ROUND.to_bits()).wrapping_add(127) << 23);
    e * scale
}

#[inline(always)]
fn forward_member(z: &mut [f32], h: &mut [f32], bias: &[f32]) {
    let width = bias.len();
    for (zr, hr) in z.chunks_exact_mut(width).zip(h.chunks_exact_mut(width)) {
        for ((zv, hv), b) in zr.iter_mut().zip(hr.iter_mut()).zip(bias) {
            let x = *zv + *b;
            let s = 1.0 / (1.0 + exp(-x));
            *zv = s;
            *hv = x * s;
        }
    }
}

#[inline(always)]
fn backward_member(g: &mut [f32], sigma: &[f32], h: &[f32], grad_bias: &mut [f32]) {
    let width = grad_bias.len();
    for ((gr, sr), hr) in g.chunks_exact_mut(width).zip(sigma.chunks_exact(width)).zip(h.chunks_exact(width)) {
        for (((gv, s), hv), gb) in gr.iter_mut().zip(sr).zip(hr).zip(grad_bias.iter_mut()) {
            let gz = *gv * (*s + *hv * (1.0 - *s));
            *gv = gz;
            *gb += gz;
        }
    }
}

/// The widest vector unit the CPU has, for LLVM to vectorize the loops with.
#[derive(Clone, Copy, PartialEq)]
enum Isa {
    Baseline,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

fn isa() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            return Isa::Avx512;
        }
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            return Isa::Avx2;
        }
    }
    Isa::Baseline
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn forward_member_avx2(z: &mut [f32], h: &mut [f32], bias: &[f32]) {
    forward_member(z, h, bias)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn forward_member_avx512(z: &mut [f32], h: &mut [f32], bias: &[f32]) {
    forward_member(z, h, bias)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn backward_member_avx2(g: &mut [f32], sigma: &[f32], h: &[f32], grad_bias: &mut [f32]) {
    backward_member(g, sigma, h, grad_bias)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn backward_member_avx512(g: &mut [f32], sigma: &[f32], h: &[f32], grad_bias: &mut [f32]) {
    backward_member(g, sigma, h, grad_bias)
}

fn forward_one(isa: Isa, z: &mut [f32], h: &mut [f32], bias: &[f32]) {
    match isa {
        // SAFETY: `isa()` found the features these need.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { forward_member_avx512(z, h, bias) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { forward_member_avx2(z, h, bias) },
        Isa::Baseline => forward_member(z, h, bias),
    }
}

fn backward_one(isa: Isa, g: &mut [f32], sigma: &[f32], h: &[f32], grad_bias: &mut [f32]) {
    match isa {
        // SAFETY: `isa()` found the features these need.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { backward_member_avx512(g, sigma, h, grad_bias) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { backward_member_avx2(g, sigma, h, grad_bias) },
        Isa::Baseline => backward_member(g, sigma, h, grad_bias),
    }
}

/// Consecutive members per thread: `(first member, count)` for each of at most `threads`.
fn groups(members: usize, threads: usize) -> Vec<(usize, usize)> {
    let parts = threads.clamp(1, members.max(1));
    let mut out = Vec::with_capacity(parts);
    let mut start = 0;
    for p in 0..parts {
        let n = (members - start) / (parts - p);
        out.push((start, n));
        start += n;
    }
    out
}

/// `x` (member-major, `per` values a member) cut at the boundaries of `groups`.
fn cut_mut<'a>(x: &'a mut [f32], per: usize, groups: &[(usize, usize)]) -> Vec<&'a mut [f32]> {
    let mut rest = x;
    groups
        .iter()
        .map(|&(_, n)| {
            let (piece, tail) = std::mem::take(&mut rest).split_at_mut(n * per);
            rest = tail;
            piece
        })
        .collect()
}

/// [`cut_mut`] for a read-only `x`.
fn cut<'a>(x: &'a [f32], per: usize, groups: &[(usize, usize)]) -> Vec<&'a [f32]> {
    groups.iter().map(|&(first, n)| &x[first * per..(first + n) * per]).collect()
}

/// A float32 view of a contiguous CPU tensor; panics naming `what` otherwise.
///
/// SAFETY (for callers): while the slice lives, the tensor's storage is not written through
/// another view (and not read through another one when the slice is written).
#[allow(clippy::mut_from_ref)] // a tensor handle is shared; its storage is what is written
unsafe fn floats<'a>(t: &'a Tensor, what: &str) -> &'a mut [f32] {
    assert!(
        t.is_contiguous() && t.kind() == Kind::Float && t.device() == Device::Cpu,
        "silu: {what} must be a contiguous float32 CPU tensor"
    );
    super::floats::floats_mut(t)
}

/// The forward pass: `z` `[E, R, W]` (the matmul output) becomes `σ`, `h` `[E, R, W]` gets
/// `z σ`; `bias` is `[E, 1, W]`. Three distinct contiguous float32 CPU tensors.
pub(crate) fn forward(z: &Tensor, h: &Tensor, bias: &Tensor, threads: usize) {
    let members = bias.size()[0] as usize;
    assert!(
        members > 0 && z.size() == h.size() && z.size()[0] == bias.size()[0],
        "silu::forward: z {:?}, h {:?}, bias {:?}",
        z.size(),
        h.size(),
        bias.size()
    );
    // SAFETY: distinct tensors, one view each, ending with this function.
    let (z, h, bias) = unsafe { (floats(z, "z"), floats(h, "h"), &*floats(bias, "bias")) };
    let (per, width, groups, isa) = (z.len() / members, bias.len() / members, groups(members, threads), isa());
    let pieces: Vec<_> =
        cut_mut(z, per, &groups).into_iter().zip(cut_mut(h, per, &groups)).zip(cut(bias, width, &groups)).collect();
    crate::nn::team::run(pieces, |((z, h), b): ((&mut [f32], &mut [f32]), &[f32])| {
        for ((zm, hm), bm) in z.chunks_exact_mut(per).zip(h.chunks_exact_mut(per)).zip(b.chunks_exact(width)) {
            forward_one(isa, zm, hm, bm);
        }
    });
}

/// The backward pass: `g` `[E, R, W]` (`∂L/∂h`) becomes `∂L/∂z` in place, and each member's
/// `Σ_r ∂L/∂z` is added to `grad_bias` `[E, 1, W]`; `sigma` and `h` are the forward pass's.
/// Four distinct contiguous float32 CPU tensors.
pub(crate) fn backward(g: &Tensor, sigma: &Tensor, h: &Tensor, grad_bias: &Tensor, threads: usize) {
    let members = grad_bias.size()[0] as usize;
    assert!(
        members > 0 && g.size() == sigma.size() && g.size() == h.size() && g.size()[0] == grad_bias.size()[0],
        "silu::backward: g {:?}, sigma {:?}, h {:?}, grad_bias {:?}",
        g.size(),
        sigma.size(),
        h.size(),
        grad_bias.size()
    );
    // SAFETY: distinct tensors, one view each, ending with this function.
    let (g, sigma, h, grad_bias) =
        unsafe { (floats(g, "g"), &*floats(sigma, "sigma"), &*floats(h, "h"), floats(grad_bias, "grad_bias")) };
    let (per, width, groups, isa) = (g.len() / members, grad_bias.len() / members, groups(members, threads), isa());
    let pieces: Vec<_> = cut_mut(g, per, &groups)
        .into_iter()
        .zip(cut(sigma, per, &groups))
        .zip(cut(h, per, &groups))
        .zip(cut_mut(grad_bias, width, &groups))
        .collect();
    crate::nn::team::run(pieces, |(((g, s), h), b): (((&mut [f32], &[f32]), &[f32]), &mut [f32])| {
        for (((gm, sm), hm), bm) in
            g.chunks_exact_mut(per).zip(s.chunks_exact(per)).zip(h.chunks_exact(per)).zip(b.chunks_exact_mut(width))
        {
            backward_one(isa, gm, sm, hm, bm);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The polynomial `e^x` against the correctly rounded one, over the whole clamped range
    /// and at its ends.
    #[test]
    fn exp_is_accurate_to_a_few_ulps() {
        let mut worst = 0f64;
        for i in 0..=200_000 {
            let x = -87.0 + 175.0 * i as f32 / 200_000.0;
            let want = (x as f64).exp();
            worst = worst.max(((exp(x) as f64) - want).abs() / want);
        }
        assert!(worst < 3e-7, "worst relative error {worst}");
        assert!(exp(-1000.0) > 0.0 && exp(-1000.0) < 1e-37 && exp(1000.0).is_finite());
    }

    /// Values and gradients against libtorch's SiLU and autograd, for z from −100 to 100, and
    /// the same bits with one thread or three.
    #[test]
    fn fused_pass_matches_autograd_and_the_thread_count() {
        let (e, r, w) = (3i64, 50i64, 17i64);
        let z = Tensor::linspace(-100.0, 100.0, e * r * w, (Kind::Float, Device::Cpu)).view([e, r, w]);
        let z = z.index_select(2, &Tensor::randperm(w, (Kind::Int64, Device::Cpu)));
        let b = Tensor::linspace(-1.0, 1.0, e * w, (Kind::Float, Device::Cpu)).view([e, 1, w]);
        let g = (Tensor::arange(e * r * w, (Kind::Float, Device::Cpu)).view([e, r, w]) * 0.37).sin();
        let zl = z.detach().set_requires_grad(true);
        let bl = b.detach().set_requires_grad(true);
        let want_h = (&zl + &bl).silu();
        let want = Tensor::run_backward(&[&(&want_h * &g).sum(Kind::Float)], &[&zl, &bl], false, false);
        let mut bits = Vec::new();
        for threads in [1, 3] {
            let (zb, hb, gb, db) =
                (z.copy(), z.zeros_like(), g.copy(), Tensor::zeros([e, 1, w], (Kind::Float, Device::Cpu)));
            forward(&zb, &hb, &b.contiguous(), threads);
            backward(&gb, &zb, &hb, &db, threads);
            let diff = |a: &Tensor, b: &Tensor| ((a - b).abs() / (b.abs() + 1.0)).max().double_value(&[]);
            assert!(diff(&hb, &want_h.detach()) < 1e-6, "h: {}", diff(&hb, &want_h.detach()));
            assert!(diff(&gb, &want[0]) < 1e-6, "∂z: {}", diff(&gb, &want[0]));
            assert!(diff(&db, &want[1]) < 1e-4, "∂b: {}", diff(&db, &want[1]));
            bits.push((
                Vec::<f32>::try_from(&hb.flatten(0, -1)).unwrap(),
                Vec::<f32>::try_from(&db.flatten(0, -1)).unwrap(),
            ));
        }
        assert_eq!(bits[0], bits[1], "one thread and three give the same bits");
    }
}
