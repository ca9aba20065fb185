//! The agent's own random-number generator.
//!
//! libtorch's global generator cannot be saved and restored through `tch`, so an agent never
//! uses it: every Gaussian sample, dropout mask, ensemble subset and weight initialization is
//! drawn from this seeded ChaCha8 stream and turned into a tensor with `Tensor::from_slice`
//! (cheap at RL batch sizes). The whole state is `(seed, word position)`, which a checkpoint
//! stores as one small `i64` tensor, so "save → load → continue" reproduces an uninterrupted run
//! bit for bit.

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tch::{Device, Kind, Tensor};

/// A seeded, checkpointable random stream for one agent.
#[derive(Debug)]
pub struct AgentRng {
    seed: u64,
    rng: ChaCha8Rng,
    /// When `Some`, every noise tensor drawn is also kept here (used by the benchmark's
    /// cross-check, which replays the same noise in PyTorch).
    recorded: Option<Vec<Tensor>>,
}

impl Clone for AgentRng {
    /// The same stream position; a clone does not record.
    fn clone(&self) -> Self {
        Self { seed: self.seed, rng: self.rng.clone(), recorded: None }
    }
}

/// Below this many Box–Muller pairs a normal draw is transformed on one thread.
const PARALLEL_PAIRS: usize = 256;

impl AgentRng {
    /// A fresh stream from `seed`.
    pub fn new(seed: u64) -> Self {
        Self { seed, rng: ChaCha8Rng::seed_from_u64(seed), recorded: None }
    }

    /// A uniform `f64` in `[0, 1)` with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// `n` standard normal samples (Box–Muller; pairs are drawn whole and the spare dropped,
    /// so the state stays just the stream position).
    ///
    /// The uniforms are drawn in stream order; the transform (a logarithm, a square root, a
    /// sine and a cosine per pair) runs split over libtorch's team for large draws, each pair by
    /// the same operations, so the values do not depend on the thread count.
    pub fn normal_vec(&mut self, n: usize) -> Vec<f32> {
        let uniforms: Vec<[f64; 2]> = (0..n.div_ceil(2)).map(|_| [1.0 - self.uniform(), self.uniform()]).collect(); // u1 ∈ (0, 1]: ln is finite
        let mut out = vec![0f32; 2 * uniforms.len()];
        let box_muller = |(u, out): (&[[f64; 2]], &mut [f32])| {
            for ([u1, u2], z) in u.iter().zip(out.chunks_exact_mut(2)) {
                let r = (-2.0 * u1.ln()).sqrt();
                let (s, c) = (2.0 * std::f64::consts::PI * u2).sin_cos();
                z[0] = (r * c) as f32;
                z[1] = (r * s) as f32;
            }
        };
        let threads = crate::nn::team::pieces(uniforms.len(), PARALLEL_PAIRS);
        let per = uniforms.len().div_ceil(threads).max(1);
        crate::nn::team::run(uniforms.chunks(per).zip(out.chunks_mut(2 * per)).collect(), box_muller);
        out.truncate(n);
        out
    }

    /// A standard normal tensor of `shape` on `device`.
    pub fn normal(&mut self, shape: &[i64], device: Device) -> Tensor {
        let n = shape.iter().product::<i64>().max(0) as usize;
        let t = Tensor::from_slice(&self.normal_vec(n)).view(shape).to_device(device);
        self.record(&t);
        t
    }

    /// A tensor of `shape` uniform in `[0, 1)` on `device`.
    pub fn uniform_tensor(&mut self, shape: &[i64], device: Device) -> Tensor {
        let n = shape.iter().product::<i64>().max(0) as usize;
        let v: Vec<f32> = (0..n).map(|_| self.uniform() as f32).collect();
        let t = Tensor::from_slice(&v).view(shape).to_device(device);
        self.record(&t);
        t
    }

    /// An integer uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        // Rejection sampling: unbiased for any n.
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let x = self.rng.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }

    /// A random permutation of `0..n` on the host: [`AgentRng::indices`] of all `n` without
    /// replacement (the same draws), read back.
    pub fn permutation(&mut self, n: usize) -> Vec<i64> {
        Vec::<i64>::try_from(self.indices(n, n, false, Device::Cpu)).unwrap_or_default()
    }

    /// `k` indices from `0..n` as an `i64` tensor on `device`: with replacement (WSRL/REDQ
    /// `randint`) or without (RLPD; a partial Fisher–Yates shuffle). Without replacement needs
    /// `k <= n`.
    pub fn indices(&mut self, n: usize, k: usize, with_replacement: bool, device: Device) -> Tensor {
        let idx: Vec<i64> = if with_replacement {
            (0..k).map(|_| self.below(n as u64) as i64).collect()
        } else {
            let mut all: Vec<i64> = (0..n as i64).collect();
            for i in 0..k.min(n) {
                let j = i + self.below((n - i) as u64) as usize;
                all.swap(i, j);
            }
            all.truncate(k.min(n));
            all
        };
        let t = Tensor::from_slice(&idx).to_device(device);
        self.record(&t);
        t
    }

    /// The state as a 4-element `i64` tensor: seed, stream, word position (high, low).
    pub fn state_tensor(&self) -> Tensor {
        let pos = self.rng.get_word_pos();
        let v = [self.seed as i64, self.rng.get_stream() as i64, (pos >> 64) as u64 as i64, pos as u64 as i64];
        Tensor::from_slice(&v)
    }

    /// Restore the state written by [`AgentRng::state_tensor`]; `None` when the tensor is not
    /// four `i64`s.
    pub fn from_state_tensor(t: &Tensor) -> Option<Self> {
        if t.kind() != Kind::Int64 || t.numel() != 4 {
            return None;
        }
        let v: Vec<i64> = Vec::<i64>::try_from(t.to_device(Device::Cpu).flatten(0, -1)).ok()?;
        let seed = v[0] as u64;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(v[1] as u64);
        rng.set_word_pos(((v[2] as u64 as u128) << 64) | v[3] as u64 as u128);
        Some(Self { seed, rng, recorded: None })
    }

    /// Start keeping every noise tensor drawn (for the benchmark's PyTorch cross-check).
    pub fn start_recording(&mut self) {
        self.recorded = Some(Vec::new());
    }

    /// Stop recording and return what was drawn, in order.
    pub fn take_recorded(&mut self) -> Vec<Tensor> {
        self.recorded.take().unwrap_or_default()
    }

    fn record(&mut self, t: &Tensor) {
        if let Some(r) = self.recorded.as_mut() {
            r.push(t.shallow_clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Box–Muller draws are the sequential ones (the stream every earlier run and
    /// checkpoint was made with), with the transform split over the team or not.
    #[test]
    fn normal_draws_keep_the_sequential_stream() {
        for n in [1usize, 7, 600, 1537] {
            let mut rng = AgentRng::new(9);
            let mut copy = rng.clone();
            let got = rng.normal_vec(n);
            let mut want = Vec::new();
            while want.len() < n {
                let u1 = 1.0 - copy.uniform();
                let u2 = copy.uniform();
                let r = (-2.0 * u1.ln()).sqrt();
                let (s, c) = (2.0 * std::f64::consts::PI * u2).sin_cos();
                want.push((r * c) as f32);
                want.push((r * s) as f32);
            }
            want.truncate(n);
            assert_eq!(got, want, "{n} draws");
            assert_eq!(rng.uniform(), copy.uniform(), "the stream position after {n} draws");
        }
    }

    #[test]
    fn normal_samples_have_unit_moments() {
        let mut r = AgentRng::new(3);
        let v = r.normal_vec(200_001);
        let n = v.len() as f64;
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
        let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var - 1.0).abs() < 0.01, "var {var}");
    }

    #[test]
    fn state_round_trip_continues_the_stream() {
        let mut a = AgentRng::new(42);
        a.normal_vec(77);
        let mut b = AgentRng::from_state_tensor(&a.state_tensor()).unwrap();
        assert_eq!(a.normal_vec(10), b.normal_vec(10));
        assert_eq!(a.below(1000), b.below(1000));
    }

    #[test]
    fn indices_without_replacement_are_distinct() {
        let mut r = AgentRng::new(1);
        for _ in 0..50 {
            let t = r.indices(10, 10, false, Device::Cpu);
            let mut v = Vec::<i64>::try_from(&t).unwrap();
            v.sort();
            assert_eq!(v, (0..10).collect::<Vec<i64>>());
        }
        let t = r.indices(10, 1000, true, Device::Cpu);
        let v = Vec::<i64>::try_from(&t).unwrap();
        assert!(v.iter().all(|&i| (0..10).contains(&i)));
        assert!((0..10).all(|i| v.contains(&i)));
    }
}
