//! Float32 views of contiguous CPU tensors, for the fused CPU passes (the ensemble's taped
//! pass, the tanh-Gaussian head, SiLU, Adam, the TD target): one place for the unsafe view.

use tch::{Device, Kind, Tensor};

/// A read-only float32 view of `t`.
///
/// SAFETY (for callers): `t` is a contiguous float32 CPU tensor, its storage is not written
/// through another view while the slice lives, and the slice does not outlive `t`.
pub(crate) unsafe fn floats(t: &Tensor) -> &[f32] {
    debug_assert!(t.is_contiguous() && t.kind() == Kind::Float && t.device() == Device::Cpu);
    std::slice::from_raw_parts(t.data_ptr() as *const f32, t.numel())
}

/// A mutable float32 view of `t` (the contract of [`floats`], and no other view of the storage
/// is read while this one lives).
#[allow(clippy::mut_from_ref)] // a tensor handle is shared; its storage is what is written
pub(crate) unsafe fn floats_mut(t: &Tensor) -> &mut [f32] {
    debug_assert!(t.is_contiguous() && t.kind() == Kind::Float && t.device() == Device::Cpu);
    std::slice::from_raw_parts_mut(t.data_ptr() as *mut f32, t.numel())
}
