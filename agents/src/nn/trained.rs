//! A network and what trains it, held together: [`Trained`] is the module, its parameters and
//! the Adam over them; [`Frozen`] is a module whose weights no optimizer steps (a frozen target
//! network moved by Polyak averaging, BPPO's π_old, fixed state statistics).
//!
//! An agent holds each of its networks as one of these and lists them once
//! ([`crate::checkpoint::Stateful::parts`]); its checkpoint, partial loads and optimizer resets
//! follow from that list.

use super::{Adam, ParamSet};
use tch::Tensor;

/// A network trained by its own optimizer: the module, its parameters (named as the checkpoint
/// names them, `actor/l0/weight`, …) and Adam's state over them.
#[derive(Debug)]
pub struct Trained<N> {
    /// The module (holds shallow handles to `params`).
    pub net: N,
    /// Its trainable tensors.
    pub params: ParamSet,
    /// Adam over `params`.
    pub opt: Adam,
}

impl<N> Trained<N> {
    /// The network `build` registers in a fresh parameter set, with Adam at learning rate `lr`
    /// over it.
    pub fn new(lr: f64, build: impl FnOnce(&mut ParamSet) -> N) -> Self {
        let mut params = ParamSet::new();
        let net = build(&mut params);
        let opt = Adam::new(&params, lr);
        Self { net, params, opt }
    }

    /// The same with Adam's `ε = eps` (PPO: 1e-5).
    pub fn with_eps(mut self, eps: f64) -> Self {
        self.opt = self.opt.with_eps(eps);
        self
    }

    /// Differentiate `loss` in these parameters only and take one Adam step.
    pub fn minimize(&mut self, loss: &Tensor) {
        self.opt.minimize(&self.params, loss);
    }

    /// One Adam step with gradients in the parameters' order.
    pub fn apply(&mut self, grads: &[Tensor]) {
        self.opt.apply(&self.params, grads);
    }

    /// One zero-gradient Adam step ([`Adam::idle_step`]).
    pub fn idle_step(&mut self) {
        self.opt.idle_step(&self.params);
    }
}

/// A network no optimizer steps: the module and its parameters.
#[derive(Debug)]
pub struct Frozen<N> {
    /// The module (holds shallow handles to `params`).
    pub net: N,
    /// Its tensors.
    pub params: ParamSet,
}

impl<N> Frozen<N> {
    /// The module `build` registers in a fresh parameter set.
    pub fn new(build: impl FnOnce(&mut ParamSet) -> N) -> Self {
        let mut params = ParamSet::new();
        let net = build(&mut params);
        Self { net, params }
    }

    /// The module `build` registers, as a frozen copy of `of`: the same values, no gradients
    /// (a target network, `of`'s layout required).
    pub fn copy_of<M>(of: &Trained<M>, build: impl FnOnce(&mut ParamSet) -> N) -> Self {
        let frozen = Self::new(build);
        frozen.params.copy_from(&of.params);
        frozen.params.set_requires_grad(false);
        frozen
    }
}
