//! Which path the updates take: the CPU fast path (taped passes, fused and closed-form
//! gradients, AVX-512 products) or the device-generic path (libtorch ops and autograd), the one
//! CUDA takes.
//!
//! Every gate in `nn` that picks the fast path asks [`fast_cpu`] (a float32 CPU tensor, and the
//! generic path not forced) or [`generic_forced`], and counts the choice in [`fast_hits`]. One
//! process-wide switch forces the generic path on the CPU, so the path CUDA takes is tested on
//! every CI run (`agents/tests/generic_path.rs` checks each agent's losses against the fast
//! path's); it is read from `O2O_GENERIC_PATH` (`1` or `true`) on first use, and set by
//! [`force_generic`].
//!
//! The switch may change only between updates, never within one: some callers ask a gate twice
//! for one pass (an actor's closed-form step asks [`crate::nn::mlp_pass::MlpPass::applies`],
//! then builds the pass, which asks again), and the pass panics where the two answers differ.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use tch::{Device, Kind, Tensor};

/// The switch: not read yet, the fast path allowed, or the generic path forced.
static MODE: AtomicU8 = AtomicU8::new(UNSET);
const UNSET: u8 = 0;
const FAST: u8 = 1;
const GENERIC: u8 = 2;

/// How many times a gate took the fast path (relaxed: a count, not a synchronization).
static FAST_HITS: AtomicU64 = AtomicU64::new(0);

/// Force the device-generic path on the CPU (`true`) or allow the fast path again (`false`),
/// for the whole process, overriding `O2O_GENERIC_PATH`. Call it between updates only (see the
/// module doc).
pub fn force_generic(on: bool) {
    MODE.store(if on { GENERIC } else { FAST }, Ordering::Relaxed);
}

/// Whether the device-generic path is forced: [`force_generic`]'s last word, else
/// `O2O_GENERIC_PATH` (`1` or `true`, read once).
pub fn generic_forced() -> bool {
    match MODE.load(Ordering::Relaxed) {
        UNSET => {
            let on = std::env::var("O2O_GENERIC_PATH").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
            // A concurrent `force_generic` wins over the environment.
            let _ = MODE.compare_exchange(UNSET, if on { GENERIC } else { FAST }, Ordering::Relaxed, Ordering::Relaxed);
            MODE.load(Ordering::Relaxed) == GENERIC
        }
        mode => mode == GENERIC,
    }
}

/// Whether `t` may take the CPU fast path: a float32 CPU tensor, and the generic path not
/// forced. (Not counted: a gate counts the path it takes with [`hit`].)
pub(crate) fn fast_cpu(t: &Tensor) -> bool {
    t.device() == Device::Cpu && t.kind() == Kind::Float && !generic_forced()
}

/// Count one fast-path choice at a gate.
pub(crate) fn hit() {
    FAST_HITS.fetch_add(1, Ordering::Relaxed);
}

/// How many times, in this process, a gate took the fast path (so a test can tell which path
/// ran: zero while the generic path is forced).
pub fn fast_hits() -> u64 {
    FAST_HITS.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Float32 CPU tensors take the fast path unless the switch is forced; nothing else does.
    /// (The lib tests leave the switch unset, so this only reads it.)
    #[test]
    fn fast_cpu_is_float32_on_the_cpu() {
        if generic_forced() {
            eprintln!("O2O_GENERIC_PATH is set: the fast path is not exercised");
            return;
        }
        assert!(fast_cpu(&Tensor::zeros([2], (Kind::Float, Device::Cpu))));
        assert!(!fast_cpu(&Tensor::zeros([2], (Kind::Double, Device::Cpu))));
        assert!(!fast_cpu(&Tensor::zeros([2], (Kind::Int64, Device::Cpu))));
    }
}
