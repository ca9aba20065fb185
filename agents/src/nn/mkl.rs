//! MKL's grouped batched matmul (`cblas_sgemm_batch`), which the x86-64 libtorch builds carry
//! and export, reached through `dlsym` as [`super::team`] reaches libgomp. libtorch's `bmm`
//! needs every matrix of a batch to have the same shape; the grouped call does not, so a
//! ragged batch (each ensemble member's own number of rows, as in the actor's min over the
//! ensemble) runs as one threaded call without padding. Where the symbol is absent (another
//! libtorch build) callers take their libtorch path.

use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

type SgemmBatch = unsafe extern "C" fn(
    layout: c_int,
    transa: *const c_int,
    transb: *const c_int,
    m: *const c_int,
    n: *const c_int,
    k: *const c_int,
    alpha: *const f32,
    a: *const *const f32,
    lda: *const c_int,
    b: *const *const f32,
    ldb: *const c_int,
    beta: *const f32,
    c: *const *mut f32,
    ldc: *const c_int,
    group_count: c_int,
    group_size: *const c_int,
);

const ROW_MAJOR: c_int = 101;
const NO_TRANS: c_int = 111;
const TRANS: c_int = 112;

fn sgemm_batch() -> Option<SgemmBatch> {
    static F: OnceLock<Option<SgemmBatch>> = OnceLock::new();
    *F.get_or_init(|| {
        // SAFETY: dlsym on the global namespace; a found symbol is MKL's `cblas_sgemm_batch`
        // (LP64 interface, 32-bit integers, as libtorch links it), whose C signature is the
        // one transmuted to.
        unsafe {
            let p = libc::dlsym(libc::RTLD_DEFAULT, c"cblas_sgemm_batch".as_ptr());
            (!p.is_null()).then(|| std::mem::transmute::<*mut c_void, SgemmBatch>(p))
        }
    })
}

/// Whether [`ragged_matmul`] can run here.
#[cfg(test)]
pub(crate) fn available() -> bool {
    sgemm_batch().is_some()
}

/// One product of a ragged batch: `c[m×n] = a[m×k] · op(b)`, all row-major and contiguous,
/// `op(b) = bᵀ` for `b` stored `[n, k]` when `transpose_b`, else `b` stored `[k, n]`.
pub(crate) struct Product<'a> {
    pub a: &'a [f32],
    pub b: &'a [f32],
    pub c: &'a mut [f32],
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub transpose_b: bool,
}

/// Every product in one `cblas_sgemm_batch` call (one group each, so shapes may differ);
/// `false` (nothing done) where MKL is not available. Products with `m = 0` are skipped.
/// Panics if a slice is shorter than its shape says (a programming error).
pub(crate) fn ragged_matmul(products: Vec<Product<'_>>) -> bool {
    let Some(f) = sgemm_batch() else { return false };
    let products: Vec<Product<'_>> = products.into_iter().filter(|p| p.m > 0).collect();
    if products.is_empty() {
        return true;
    }
    let int = |v: usize| c_int::try_from(v).expect("a matmul dimension fits in 32 bits");
    for p in &products {
        assert!(
            p.a.len() >= p.m * p.k && p.b.len() >= p.k * p.n && p.c.len() >= p.m * p.n,
            "ragged_matmul: a slice is shorter than its shape"
        );
    }
    let g = products.len();
    let transa = vec![NO_TRANS; g];
    let transb: Vec<c_int> = products.iter().map(|p| if p.transpose_b { TRANS } else { NO_TRANS }).collect();
    let (m, n, k): (Vec<c_int>, Vec<c_int>, Vec<c_int>) = (
        products.iter().map(|p| int(p.m)).collect(),
        products.iter().map(|p| int(p.n)).collect(),
        products.iter().map(|p| int(p.k)).collect(),
    );
    let lda = k.clone();
    let ldb: Vec<c_int> = products.iter().map(|p| int(if p.transpose_b { p.k } else { p.n })).collect();
    let ldc = n.clone();
    let (alpha, beta, size) = (vec![1f32; g], vec![0f32; g], vec![1 as c_int; g]);
    let a: Vec<*const f32> = products.iter().map(|p| p.a.as_ptr()).collect();
    let b: Vec<*const f32> = products.iter().map(|p| p.b.as_ptr()).collect();
    let c: Vec<*mut f32> = products.into_iter().map(|p| p.c.as_mut_ptr()).collect();
    // SAFETY: every array has `g` entries; each product's slices were checked to hold its
    // matrices (leading dimensions as set above: contiguous row-major), the outputs are
    // distinct `&mut` slices, and MKL returns after writing them.
    unsafe {
        f(
            ROW_MAJOR,
            transa.as_ptr(),
            transb.as_ptr(),
            m.as_ptr(),
            n.as_ptr(),
            k.as_ptr(),
            alpha.as_ptr(),
            a.as_ptr(),
            lda.as_ptr(),
            b.as_ptr(),
            ldb.as_ptr(),
            beta.as_ptr(),
            c.as_ptr(),
            ldc.as_ptr(),
            int(g),
            size.as_ptr(),
        );
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ragged batch (different m per product, one with m = 0, both op(b) forms) equals the
    /// matmuls written out.
    #[test]
    fn ragged_batch_matches_plain_matmuls() {
        if !available() {
            return;
        }
        let val = |i: usize, s: usize| ((i * 7919 + s * 104_729) % 2001) as f32 / 1000.0 - 1.0;
        let shapes = [(5usize, 7usize, 3usize, true), (0, 4, 4, false), (9, 2, 6, false), (1, 8, 8, true)];
        let data: Vec<(Vec<f32>, Vec<f32>)> = shapes
            .iter()
            .enumerate()
            .map(|(s, &(m, n, k, _))| {
                ((0..m * k).map(|i| val(i, 2 * s)).collect(), (0..k * n).map(|i| val(i, 2 * s + 1)).collect())
            })
            .collect();
        let mut outs: Vec<Vec<f32>> = shapes.iter().map(|&(m, n, _, _)| vec![f32::NAN; m * n]).collect();
        let products = shapes
            .iter()
            .zip(&data)
            .zip(outs.iter_mut())
            .map(|((&(m, n, k, t), (a, b)), c)| Product { a, b, c, m, n, k, transpose_b: t })
            .collect();
        assert!(ragged_matmul(products));
        for ((&(m, n, k, t), (a, b)), c) in shapes.iter().zip(&data).zip(&outs) {
            for i in 0..m {
                for j in 0..n {
                    let want: f32 = (0..k).map(|l| a[i * k + l] * if t { b[j * k + l] } else { b[l * n + j] }).sum();
                    assert!(
                        (c[i * n + j] - want).abs() < 1e-5,
                        "({m}, {n}, {k}, {t}) at ({i}, {j}): {} vs {want}",
                        c[i * n + j]
                    );
                }
            }
        }
    }
}
