//! Batched float32 matmuls on AVX-512 for the taped CPU passes: `C_e = A_e B_e` for every
//! ensemble member `e`, each output the one chain of fused multiply-adds over `p = 0, 1, …`.
//!
//! libtorch's CPU matmuls are MKL's, and on AMD processors MKL runs its AVX2 kernels even where
//! the CPU has AVX-512. On a core with full-width AVX-512 (AMD Zen 5) that is half the FMA
//! rate: measured here, a 256³ product ran at about 95–100 GFLOP/s per core in MKL against
//! 180 GFLOP/s in the kernel below, whose FMA loop peaks at 238 against AVX2's 121. The
//! networks' products are small (256 rows, 256 wide), so the kernel needs no packing: a tile of
//! up to 4 rows × 64 columns keeps its 16 accumulators in registers, each `B` row segment is
//! loaded once per tile and step, and each `A` value is broadcast.
//!
//! Each output is `fma(A(i, k−1), B(k−1, j), … fma(A(i, 0), B(0, j), 0))` whatever the tile,
//! the column tail or the number of threads (work is split by rows), so results do not depend
//! on the thread count. They differ from MKL's in the last bits (another summation order).
//!
//! [`available`] says whether the kernels run here: the CPU has AVX-512F, the environment
//! does not ask for libtorch's (`O2O_CPU_GEMM=libtorch`) and the generic path is not forced
//! ([`super::path`]); elsewhere callers take their libtorch path.

use super::floats::{floats, floats_mut};
use super::path;
use std::sync::OnceLock;
use tch::{Device, Kind, Tensor};

/// Whether [`batched`] runs on this machine (AVX-512F, and `O2O_CPU_GEMM` is not `libtorch`,
/// both read once) and now (the generic path not forced, [`path::generic_forced`]).
pub(crate) fn available() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    let here = *ON.get_or_init(|| {
        let wanted = std::env::var("O2O_CPU_GEMM").map(|v| v != "libtorch").unwrap_or(true);
        wanted && cpu_has_avx512()
    });
    here && !path::generic_forced()
}

/// Whether the AVX-512 products run here (`available` for callers outside the crate: the bench
/// reports which products ran).
pub fn avx512_products() -> bool {
    available()
}

fn cpu_has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The left factor: `A_e(i, p) = data[e·member + i·row + p·col]` (`member = 0`: one `A` shared
/// by every member; `row = 1` reads a row-major matrix transposed).
#[derive(Clone, Copy)]
pub(crate) struct Lhs<'a> {
    pub data: &'a [f32],
    pub member: usize,
    pub row: usize,
    pub col: usize,
}

/// The right factor, rows contiguous: `B_e(p, j) = data[s_e·member + p·n + j]` with `s_e = e`,
/// or `pick[e]` (members chosen from a larger stack without copying them out).
#[derive(Clone, Copy)]
pub(crate) struct Rhs<'a> {
    pub data: &'a [f32],
    pub member: usize,
    pub pick: Option<&'a [usize]>,
}

/// Shapes: `members` products of `[m × k] · [k × n]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub members: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

/// Rows per tile.
const TILE_ROWS: usize = 4;
/// Columns per full tile (four 16-lane registers per row).
const TILE_COLS: usize = 64;
/// Below this many multiply-adds a product runs on the calling thread.
const SPLIT_MIN: usize = 1 << 18;

/// `C_e = A_e B_e` for every member into `c` (`[members, m, n]`, contiguous, overwritten),
/// split by row tiles over libtorch's team. Returns `false`, with nothing written, where the
/// kernels are not [`available`].
///
/// Panics if a factor's slice is shorter than its strides and shape say, `c` is not
/// `members · m · n` long, or a `pick` entry is out of range or there are fewer than `members`
/// (programming errors).
pub(crate) fn batched(a: Lhs<'_>, b: Rhs<'_>, c: &mut [f32], s: Shape) -> bool {
    check(a, b, c.len(), s);
    if !available() {
        return false;
    }
    path::hit();
    let units = s.members * s.m.div_ceil(TILE_ROWS);
    let threads = if s.members * s.m * s.n * s.k >= SPLIT_MIN { super::team::pieces(units, 2) } else { 1 };
    // SAFETY: `available` checked AVX-512F and `check` the bounds.
    unsafe { split(a, b, c, s, threads) };
    true
}

/// [`batched`] cut into `threads` pieces (at most one per row tile) on the team.
///
/// SAFETY (for callers): the CPU has AVX-512F and [`check`] passed for `a`, `b`, `c`, `s`.
unsafe fn split(a: Lhs<'_>, b: Rhs<'_>, c: &mut [f32], s: Shape, threads: usize) {
    if s.members == 0 || s.m == 0 || s.n == 0 {
        return;
    }
    let groups = s.m.div_ceil(TILE_ROWS);
    let units = s.members * groups;
    let threads = threads.clamp(1, units);
    // Piece t takes units [t·units/threads, (t+1)·units/threads): consecutive (member, row
    // tile) pairs, whose outputs are one contiguous range of `c`.
    let offset = |u: usize| (u / groups * s.m + (u % groups * TILE_ROWS).min(s.m)) * s.n;
    let mut pieces = Vec::with_capacity(threads);
    let mut rest = c;
    for t in 0..threads {
        let (u0, u1) = (t * units / threads, (t + 1) * units / threads);
        let (mine, tail) = rest.split_at_mut(offset(u1) - offset(u0));
        rest = tail;
        pieces.push((u0, u1, mine));
    }
    super::team::run(pieces, |(u0, u1, out)| {
        // SAFETY: the caller's contract; `out` is exactly these units' outputs.
        unsafe { run_units(a, b, out, s, groups, u0, u1) }
    });
}

/// `a b` for `a` `[E, m, k]` and `b` `[E, k, n]` → `[E, m, n]`; with `pick`, `b` is a larger
/// stack `[S, k, n]` and product `e` takes its member `pick[e]` in place. `None` (nothing done)
/// where the kernels are not [`available`] or a factor is not a float32 CPU tensor.
pub(crate) fn bmm(a: &Tensor, b: &Tensor, pick: Option<&[usize]>) -> Option<Tensor> {
    let ([e, m, k], [eb, k2, n]) = (dims3(a)?, dims3(b)?);
    assert!(k == k2 && (pick.is_some() || e == eb), "gemm::bmm: shapes [{e}, {m}, {k}] and [{eb}, {k2}, {n}]");
    product(a, (m * k, k, 1), b, pick, Shape { members: e, m, n, k })
}

/// `aᵀ b` for `a` `[E, k, m]`, or `[k, m]` shared by every member, and `b` `[E, k, n]` →
/// `[E, m, n]` (the weight gradient `xᵀ g`); `None` as [`bmm`].
pub(crate) fn bmm_at(a: &Tensor, b: &Tensor) -> Option<Tensor> {
    let [e, k, n] = dims3(b)?;
    let (member, k2, m) = match a.size()[..] {
        [ea, ka, ma] if ea as usize == e => ((ka * ma) as usize, ka as usize, ma as usize),
        [ka, ma] => (0, ka as usize, ma as usize),
        _ => panic!("gemm::bmm_at: the left factor is neither [E, k, m] nor [k, m]"),
    };
    assert_eq!(k, k2, "gemm::bmm_at: inner sizes differ");
    product(a, (member, 1, m), b, None, Shape { members: e, m, n, k })
}

/// `a bᵀ` for `a` `[E, m, k]` and `b` `[E, n, k]` → `[E, m, n]` (the input gradient `g Wᵀ`),
/// through `b` transposed member by member (the kernel's right factor has contiguous rows);
/// `None` as [`bmm`].
pub(crate) fn bmm_bt(a: &Tensor, b: &Tensor) -> Option<Tensor> {
    let ([e, m, k], [eb, n, k2]) = (dims3(a)?, dims3(b)?);
    assert!(e == eb && k == k2, "gemm::bmm_bt: shapes [{e}, {m}, {k}] and [{eb}, {n}, {k2}]");
    let b = b.contiguous();
    let bt = Tensor::empty([e as i64, k as i64, n as i64], (Kind::Float, Device::Cpu));
    // SAFETY: contiguous float32 CPU tensors (checked by `dims3`), `bt` fresh; the views end here.
    unsafe { transpose_members(floats(&b), floats_mut(&bt), e, n, k) };
    product(a, (m * k, k, 1), &bt, None, Shape { members: e, m, n, k })
}

/// The sizes of a 3-D float32 CPU tensor, where the kernels run; else `None`.
fn dims3(t: &Tensor) -> Option<[usize; 3]> {
    if !available() || !path::fast_cpu(t) {
        return None;
    }
    match t.size()[..] {
        [a, b, c] => Some([a as usize, b as usize, c as usize]),
        _ => None,
    }
}

/// [`batched`] on tensors: `A_e(i, p)` at `a[e·member + i·row + p·col]`, `B_e` the row-major
/// `[k, n]` matrix `pick[e]` (or `e`) of `b`, into a fresh `[members, m, n]` tensor.
fn product(
    a: &Tensor,
    (member, row, col): (usize, usize, usize),
    b: &Tensor,
    pick: Option<&[usize]>,
    s: Shape,
) -> Option<Tensor> {
    if !path::fast_cpu(a) {
        return None;
    }
    let out = Tensor::empty([s.members as i64, s.m as i64, s.n as i64], (Kind::Float, Device::Cpu));
    let (a, b) = (a.contiguous(), b.contiguous());
    // SAFETY: contiguous float32 CPU tensors; `out` is fresh; the views end with this statement.
    let done = unsafe {
        batched(
            Lhs { data: floats(&a), member, row, col },
            Rhs { data: floats(&b), member: s.k * s.n, pick },
            floats_mut(&out),
            s,
        )
    };
    done.then_some(out)
}

/// The bounds [`batched`] relies on.
fn check(a: Lhs<'_>, b: Rhs<'_>, c_len: usize, s: Shape) {
    assert_eq!(c_len, s.members * s.m * s.n, "gemm: the output is not members · m · n long");
    if s.members == 0 || s.m == 0 || s.n == 0 || s.k == 0 {
        return;
    }
    let last_a = (s.members - 1) * a.member + (s.m - 1) * a.row + (s.k - 1) * a.col;
    assert!(last_a < a.data.len(), "gemm: the left factor is shorter than its strides say");
    let last_member = match b.pick {
        Some(p) => {
            assert!(p.len() >= s.members, "gemm: fewer picked members than products");
            p[..s.members].iter().copied().max().unwrap_or(0)
        }
        None => s.members - 1,
    };
    assert!(
        last_member * b.member + s.k * s.n <= b.data.len(),
        "gemm: the right factor is shorter than its strides say"
    );
}

/// Units `[u0, u1)` (unit = member · groups + row group) into `out`, their outputs.
///
/// SAFETY (for callers): the CPU has AVX-512F and [`check`] passed for `a`, `b`, `s`.
unsafe fn run_units(a: Lhs<'_>, b: Rhs<'_>, out: &mut [f32], s: Shape, groups: usize, u0: usize, u1: usize) {
    let mut u = u0;
    let mut written = 0;
    while u < u1 {
        let e = u / groups;
        let g_end = u1.min((e + 1) * groups);
        let (i0, i1) = ((u % groups) * TILE_ROWS, ((g_end - e * groups) * TILE_ROWS).min(s.m));
        let pa = a.data.as_ptr().add(e * a.member);
        let pb = b.data.as_ptr().add(b.pick.map_or(e, |p| p[e]) * b.member);
        let rows = &mut out[written..written + (i1 - i0) * s.n];
        rows_of(pa, a.row, a.col, pb, rows.as_mut_ptr(), i0, i1, s.n, s.k);
        written += rows.len();
        u = g_end;
    }
}

/// Rows `[i0, i1)` of one member's product into `c` (its rows from `i0`), column block by
/// column block so each `B` panel is reused by every row tile.
///
/// SAFETY (for callers): as [`run_units`]; `c` holds `(i1 − i0) · n` values.
#[allow(clippy::too_many_arguments)]
unsafe fn rows_of(
    a: *const f32,
    a_row: usize,
    a_col: usize,
    b: *const f32,
    c: *mut f32,
    i0: usize,
    i1: usize,
    n: usize,
    k: usize,
) {
    let mut j = 0;
    while j < n {
        let cols = (n - j).min(TILE_COLS);
        let mut i = i0;
        while i < i1 {
            let rows = (i1 - i).min(TILE_ROWS);
            let (ta, tc) = (a.add(i * a_row), c.add((i - i0) * n + j));
            avx512::tile(rows, cols, ta, a_row, a_col, b.add(j), n, tc, k);
            i += rows;
        }
        j += cols;
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    /// One tile: `rows ≤ 4` rows × `cols ≤ 64` columns.
    ///
    /// SAFETY (for callers): the CPU has AVX-512F; `a` (strides `a_row`, `a_col`) holds the
    /// tile's `rows × k` values, `b` (row stride `n`) its `k × cols` values, and `c` (row
    /// stride `n`) its `rows × cols` outputs.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) unsafe fn tile(
        rows: usize,
        cols: usize,
        a: *const f32,
        a_row: usize,
        a_col: usize,
        b: *const f32,
        n: usize,
        c: *mut f32,
        k: usize,
    ) {
        match (rows, cols) {
            (4, 64) => kernel::<4, 4>(a, a_row, a_col, b, n, c, k, u16::MAX),
            (3, 64) => kernel::<3, 4>(a, a_row, a_col, b, n, c, k, u16::MAX),
            (2, 64) => kernel::<2, 4>(a, a_row, a_col, b, n, c, k, u16::MAX),
            (1, 64) => kernel::<1, 4>(a, a_row, a_col, b, n, c, k, u16::MAX),
            _ => {
                // The column tail, 16 at a time, the last masked.
                let mut j = 0;
                while j < cols {
                    let w = (cols - j).min(16);
                    let mask = if w == 16 { u16::MAX } else { (1u16 << w) - 1 };
                    let (bj, cj) = (b.add(j), c.add(j));
                    match rows {
                        4 => kernel::<4, 1>(a, a_row, a_col, bj, n, cj, k, mask),
                        3 => kernel::<3, 1>(a, a_row, a_col, bj, n, cj, k, mask),
                        2 => kernel::<2, 1>(a, a_row, a_col, bj, n, cj, k, mask),
                        _ => kernel::<1, 1>(a, a_row, a_col, bj, n, cj, k, mask),
                    }
                    j += w;
                }
            }
        }
    }

    /// [`super::fma_peak_gflops`]'s loop on 16 lanes.
    ///
    /// SAFETY (for callers): the CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn fma_chains(iters: usize) -> f32 {
        let mut acc = [_mm512_setzero_ps(); super::CHAINS];
        let (x, y) = (_mm512_set1_ps(0.999_999), _mm512_set1_ps(1e-7));
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = _mm512_fmadd_ps(*a, x, y);
            }
        }
        acc.iter().map(|a| _mm512_reduce_add_ps(*a)).sum()
    }

    /// `R` rows × `Q` registers of 16 columns, the last register's lanes limited by `mask`:
    /// `acc[r][q] = fma(A(r, p), B(p, ·), acc[r][q])` for `p = 0..k`, then stored.
    ///
    /// SAFETY (for callers): as [`tile`], for `R` rows and `16 (Q − 1) + popcount(mask)`
    /// columns.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f")]
    unsafe fn kernel<const R: usize, const Q: usize>(
        a: *const f32,
        a_row: usize,
        a_col: usize,
        b: *const f32,
        n: usize,
        c: *mut f32,
        k: usize,
        mask: u16,
    ) {
        let mut acc = [[_mm512_setzero_ps(); Q]; R];
        let lanes = |q: usize| if q + 1 == Q { mask } else { u16::MAX };
        for p in 0..k {
            let row = b.add(p * n);
            let mut bv = [_mm512_setzero_ps(); Q];
            for (q, v) in bv.iter_mut().enumerate() {
                *v = _mm512_maskz_loadu_ps(lanes(q), row.add(16 * q));
            }
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let x = _mm512_set1_ps(*a.add(r * a_row + p * a_col));
                for (q, v) in acc_r.iter_mut().enumerate() {
                    *v = _mm512_fmadd_ps(x, bv[q], *v);
                }
            }
        }
        for (r, acc_r) in acc.iter().enumerate() {
            for (q, v) in acc_r.iter().enumerate() {
                _mm512_mask_storeu_ps(c.add(r * n + 16 * q), lanes(q), *v);
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod avx512 {
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn tile(
        _: usize,
        _: usize,
        _: *const f32,
        _: usize,
        _: usize,
        _: *const f32,
        _: usize,
        _: *mut f32,
        _: usize,
    ) {
        unreachable!("gemm::available is false off x86-64")
    }
}

/// The cores' float32 multiply-add ceiling, GFLOP/s over libtorch's team (its thread count):
/// each thread runs independent chains of fused multiply-adds on the widest vectors the CPU
/// has (16 lanes with AVX-512F, else 8 with AVX2 and FMA; 0 on other CPUs), whether or not
/// the updates' products run on the kernels here. The bench reports it beside the 1024³ matmul
/// peak, which on AMD CPUs is MKL's AVX2 kernel.
pub fn fma_peak_gflops() -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        let wide = cpu_has_avx512();
        let avx2 = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
        if !wide && !avx2 {
            return 0.0;
        }
        let threads = super::team::pieces(usize::MAX, 0);
        let iters = 20_000_000usize;
        let run = |_: usize| {
            // SAFETY: the features each loop needs were checked above.
            let s = unsafe {
                if wide {
                    avx512::fma_chains(iters)
                } else {
                    avx2_chains(iters)
                }
            };
            std::hint::black_box(s);
        };
        super::team::run(vec![0usize; threads], run);
        let t = std::time::Instant::now();
        super::team::run(vec![0usize; threads], run);
        let lanes = if wide { 16.0 } else { 8.0 };
        threads as f64 * iters as f64 * CHAINS as f64 * lanes * 2.0 / t.elapsed().as_secs_f64() / 1e9
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0.0
    }
}

/// Independent multiply-add chains per thread in [`fma_peak_gflops`] (enough to cover the FMA
/// latency on two pipes).
const CHAINS: usize = 12;

/// [`fma_peak_gflops`]'s loop on 8 lanes.
///
/// SAFETY (for callers): the CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_chains(iters: usize) -> f32 {
    use std::arch::x86_64::*;
    let mut acc = [_mm256_setzero_ps(); CHAINS];
    let (x, y) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-7));
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = _mm256_fmadd_ps(*a, x, y);
        }
    }
    let mut lanes = [0f32; 8];
    acc.iter()
        .map(|a| {
            _mm256_storeu_ps(lanes.as_mut_ptr(), *a);
            lanes.iter().sum::<f32>()
        })
        .sum()
}

/// `out_e = w_eᵀ` for `members` matrices of `rows × cols` (`out_e` is `cols × rows`), split
/// by members over the team: the right factor of `g Wᵀ` for [`batched`], whose `B` rows must
/// be contiguous.
fn transpose_members(w: &[f32], out: &mut [f32], members: usize, rows: usize, cols: usize) {
    let each = rows * cols;
    assert!(w.len() >= members * each && out.len() == members * each, "transpose_members: slice lengths");
    if each == 0 {
        return;
    }
    let threads = super::team::pieces(members * each, 1 << 16).min(members).max(1);
    let mut pieces = Vec::with_capacity(threads);
    let mut rest = out;
    for t in 0..threads {
        let (e0, e1) = (t * members / threads, (t + 1) * members / threads);
        let (mine, tail) = rest.split_at_mut((e1 - e0) * each);
        rest = tail;
        pieces.push((e0, mine));
    }
    super::team::run(pieces, |(e0, mine): (usize, &mut [f32])| {
        for (m, o) in mine.chunks_exact_mut(each).enumerate() {
            transpose(&w[(e0 + m) * each..][..each], o, rows, cols);
        }
    });
}

/// `out = srcᵀ` for one `rows × cols` matrix: 8 × 8 blocks through AVX registers where the CPU
/// has AVX2, the edges (and other CPUs) one value at a time.
fn transpose(src: &[f32], out: &mut [f32], rows: usize, cols: usize) {
    assert!(src.len() == rows * cols && out.len() == rows * cols);
    let (mut r_done, mut c_done) = (0, 0);
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        (r_done, c_done) = (rows / 8 * 8, cols / 8 * 8);
        // SAFETY: AVX2 is present; every block lies inside both matrices (checked lengths).
        unsafe { avx2_blocks(src, out, rows, cols, r_done, c_done) };
    }
    for r in 0..rows {
        let c0 = if r < r_done { c_done } else { 0 };
        for c in c0..cols {
            out[c * rows + r] = src[r * cols + c];
        }
    }
}

/// The full 8 × 8 blocks of [`transpose`] over rows `[0, r_end)` and columns `[0, c_end)`.
///
/// SAFETY (for callers): the CPU has AVX2; `r_end ≤ rows`, `c_end ≤ cols`, both multiples of 8,
/// and both slices hold `rows · cols` values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avx2_blocks(src: &[f32], out: &mut [f32], rows: usize, cols: usize, r_end: usize, c_end: usize) {
    use std::arch::x86_64::*;
    let (ps, po) = (src.as_ptr(), out.as_mut_ptr());
    for r0 in (0..r_end).step_by(8) {
        for c0 in (0..c_end).step_by(8) {
            let row = |i: usize| _mm256_loadu_ps(ps.add((r0 + i) * cols + c0));
            let (a0, a1, a2, a3, a4, a5, a6, a7) = (row(0), row(1), row(2), row(3), row(4), row(5), row(6), row(7));
            let (t0, t1) = (_mm256_unpacklo_ps(a0, a1), _mm256_unpackhi_ps(a0, a1));
            let (t2, t3) = (_mm256_unpacklo_ps(a2, a3), _mm256_unpackhi_ps(a2, a3));
            let (t4, t5) = (_mm256_unpacklo_ps(a4, a5), _mm256_unpackhi_ps(a4, a5));
            let (t6, t7) = (_mm256_unpacklo_ps(a6, a7), _mm256_unpackhi_ps(a6, a7));
            let (u0, u1) = (_mm256_shuffle_ps::<0x44>(t0, t2), _mm256_shuffle_ps::<0xEE>(t0, t2));
            let (u2, u3) = (_mm256_shuffle_ps::<0x44>(t1, t3), _mm256_shuffle_ps::<0xEE>(t1, t3));
            let (u4, u5) = (_mm256_shuffle_ps::<0x44>(t4, t6), _mm256_shuffle_ps::<0xEE>(t4, t6));
            let (u6, u7) = (_mm256_shuffle_ps::<0x44>(t5, t7), _mm256_shuffle_ps::<0xEE>(t5, t7));
            let put = |j: usize, v: __m256| _mm256_storeu_ps(po.add((c0 + j) * rows + r0), v);
            put(0, _mm256_permute2f128_ps::<0x20>(u0, u4));
            put(1, _mm256_permute2f128_ps::<0x20>(u1, u5));
            put(2, _mm256_permute2f128_ps::<0x20>(u2, u6));
            put(3, _mm256_permute2f128_ps::<0x20>(u3, u7));
            put(4, _mm256_permute2f128_ps::<0x31>(u0, u4));
            put(5, _mm256_permute2f128_ps::<0x31>(u1, u5));
            put(6, _mm256_permute2f128_ps::<0x31>(u2, u6));
            put(7, _mm256_permute2f128_ps::<0x31>(u3, u7));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: usize) -> Vec<f32> {
        (0..n).map(|i| ((i * 7919 + seed * 104_729) % 2003) as f32 / 1000.0 - 1.0).collect()
    }

    /// The product written out as the one FMA chain per output the kernel promises.
    fn reference(a: Lhs<'_>, b: Rhs<'_>, s: Shape) -> Vec<f32> {
        let mut c = vec![0f32; s.members * s.m * s.n];
        for e in 0..s.members {
            let be = b.pick.map_or(e, |p| p[e]) * b.member;
            for i in 0..s.m {
                for j in 0..s.n {
                    c[(e * s.m + i) * s.n + j] = (0..s.k).fold(0f32, |acc, p| {
                        a.data[e * a.member + i * a.row + p * a.col].mul_add(b.data[be + p * s.n + j], acc)
                    });
                }
            }
        }
        c
    }

    /// Every tile shape (full 4 × 64 tiles, fewer rows, a masked column tail, narrow products),
    /// plain and transposed left factors, a shared left factor and picked right members give
    /// the reference's bits, on one thread and cut into two and three pieces.
    #[test]
    fn products_equal_the_fma_chain_bit_for_bit() {
        if !available() {
            eprintln!("gemm: no AVX-512 here; the kernels are not exercised");
            return;
        }
        for (members, m, n, k) in [
            (3usize, 256usize, 256usize, 256usize),
            (2, 23, 256, 256),
            (1, 7, 70, 5),
            (3, 5, 13, 9),
            (2, 64, 128, 1),
            (1, 1, 1, 1),
            (4, 9, 300, 17),
        ] {
            let s = Shape { members, m, n, k };
            let lhs_plain = values(members * m * k, 1);
            let lhs_shared = values(k * m, 2);
            let rhs = values((members + 2) * k * n, 3);
            let pick: Vec<usize> = (0..members).map(|e| (e * 2 + 1) % (members + 2)).collect();
            let cases = [
                (
                    Lhs { data: &lhs_plain, member: m * k, row: k, col: 1 },
                    Rhs { data: &rhs, member: k * n, pick: None },
                ),
                (
                    Lhs { data: &lhs_plain, member: m * k, row: 1, col: m },
                    Rhs { data: &rhs, member: k * n, pick: Some(&pick) },
                ),
                (Lhs { data: &lhs_shared, member: 0, row: 1, col: m }, Rhs { data: &rhs, member: k * n, pick: None }),
            ];
            for (case, (a, b)) in cases.into_iter().enumerate() {
                let want = reference(a, b, s);
                for threads in [1, 2, 3] {
                    let mut c = vec![f32::NAN; members * m * n];
                    check(a, b, c.len(), s);
                    // SAFETY: AVX-512F is available and the bounds were checked.
                    unsafe { split(a, b, &mut c, s, threads) };
                    let same = c.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits());
                    assert!(same, "shape {s:?}, case {case}, {threads} threads");
                }
            }
        }
    }

    #[test]
    fn transpose_members_transposes_each_member() {
        for (members, rows, cols) in [(3, 37, 20), (2, 64, 48), (1, 8, 8), (2, 5, 3)] {
            transpose_case(members, rows, cols);
        }
    }

    fn transpose_case(members: usize, rows: usize, cols: usize) {
        let w = values(members * rows * cols, 4);
        let mut out = vec![0f32; members * rows * cols];
        transpose_members(&w, &mut out, members, rows, cols);
        for e in 0..members {
            for r in 0..rows {
                for c in 0..cols {
                    assert_eq!(out[e * rows * cols + c * rows + r], w[e * rows * cols + r * cols + c]);
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "shorter than its strides")]
    fn a_short_factor_is_refused() {
        let (a, b) = (values(10, 1), values(64, 2));
        let mut c = vec![0f32; 16];
        batched(
            Lhs { data: &a, member: 0, row: 4, col: 1 },
            Rhs { data: &b, member: 16, pick: None },
            &mut c,
            Shape { members: 1, m: 4, n: 4, k: 4 },
        );
    }
}
