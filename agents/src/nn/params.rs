//! A named set of trainable leaf tensors: what one optimizer updates and one checkpoint
//! section holds.
//!
//! Modules keep shallow handles to the same tensors, so copying new values in place (loading,
//! Polyak averaging) is seen by the module with no re-wiring. Names read like
//! `critic/l0/weight`; the first path component is the "part" a partial load selects.

use tch::{Device, Tensor};

/// Named trainable tensors in creation order.
#[derive(Debug, Default)]
pub struct ParamSet {
    entries: Vec<(String, Tensor)>,
}

impl ParamSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Register `t` under `name` (moved to `device`, made a trainable leaf); returns a handle
    /// sharing its storage.
    pub fn add(&mut self, name: impl Into<String>, t: Tensor, device: Device) -> Tensor {
        let t = t.to_device(device).detach().set_requires_grad(true);
        let handle = t.shallow_clone();
        self.entries.push((name.into(), t));
        handle
    }

    /// The tensors, in creation order.
    pub fn tensors(&self) -> Vec<Tensor> {
        self.entries.iter().map(|(_, t)| t.shallow_clone()).collect()
    }

    /// `(name, tensor)` pairs, in creation order.
    pub fn named(&self) -> &[(String, Tensor)] {
        &self.entries
    }

    /// Total number of scalars.
    pub fn numel(&self) -> usize {
        self.entries.iter().map(|(_, t)| t.numel()).sum()
    }

    /// Turn gradient tracking on or off for every tensor (targets never need it).
    pub fn set_requires_grad(&self, on: bool) {
        for (_, t) in &self.entries {
            let _ = t.set_requires_grad(on);
        }
    }

    /// Copy `other`'s values into these tensors (same layout required: a target network built
    /// by the same constructor). Panics on a layout mismatch, which is a programming error.
    pub fn copy_from(&self, other: &ParamSet) {
        assert_eq!(self.entries.len(), other.entries.len(), "ParamSet::copy_from: different layouts");
        tch::no_grad(|| {
            for ((_, dst), (_, src)) in self.entries.iter().zip(&other.entries) {
                dst.shallow_clone().copy_(src);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_share_storage() {
        let mut p = ParamSet::new();
        let h = p.add("a/w", Tensor::zeros([2, 3], (tch::Kind::Float, Device::Cpu)), Device::Cpu);
        let mut q = ParamSet::new();
        let _ = q.add("a/w", Tensor::ones([2, 3], (tch::Kind::Float, Device::Cpu)), Device::Cpu);
        p.copy_from(&q);
        assert_eq!(h.sum(tch::Kind::Float).double_value(&[]), 6.0);
        assert!(h.requires_grad());
        assert_eq!(p.numel(), 6);
    }
}
