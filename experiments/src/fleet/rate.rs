//! The learner's rate limiter: samples per inserted transition held in a band, Reverb's
//! `SampleToInsertRatio` (ecosystem.md §4.1), so the update-to-data ratio is the config's
//! whether actors are slow (robots) or fast (MuJoCo).
//!
//! With `spi` rows sampled per inserted transition (`updates_per_step · batch_size`), `I`
//! transitions inserted and `S` rows sampled, the learner keeps
//!
//!   d = spi · I − S  within  [spi · m − e,  spi · m + e]     (m: rows before the first update)
//!
//! An update of `B` rows is allowed when `I ≥ m` and `d − B ≥ spi · m − e` (the learner is not
//! ahead of its data); inserting `n` rows is allowed when `d + spi · n ≤ spi · m + e` (it is not
//! behind). Before `m` rows, inserts are always allowed. So at every moment
//! `|S − spi · (I − m)| ≤ e` once the first update ran, up to one message's rows.

/// Reverb-style sample-to-insert ratio limiter.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimiter {
    spi: f64,
    min_size: u64,
    error: f64,
    inserted: u64,
    sampled: u64,
}

impl RateLimiter {
    /// `spi` rows sampled per inserted row, no sampling before `min_size` rows, a band of
    /// ±`error` sampled rows.
    pub fn new(spi: f64, min_size: u64, error: f64) -> Self {
        Self { spi, min_size, error, inserted: 0, sampled: 0 }
    }

    /// Continue from counts (a resumed learner).
    pub fn with_counts(mut self, inserted: u64, sampled: u64) -> Self {
        self.inserted = inserted;
        self.sampled = sampled;
        self
    }

    fn diff(&self) -> f64 {
        self.spi * self.inserted as f64 - self.sampled as f64
    }

    /// Whether an update of `rows` rows may run now.
    pub fn can_sample(&self, rows: u64) -> bool {
        self.inserted >= self.min_size && self.diff() - rows as f64 >= self.spi * self.min_size as f64 - self.error
    }

    /// Whether `rows` more inserted rows keep the learner within its band.
    pub fn can_insert(&self, rows: u64) -> bool {
        self.inserted < self.min_size
            || self.diff() + self.spi * rows as f64 <= self.spi * self.min_size as f64 + self.error
    }

    /// Record inserted rows.
    pub fn inserted(&mut self, rows: u64) {
        self.inserted += rows;
    }

    /// Record sampled rows.
    pub fn sampled(&mut self, rows: u64) {
        self.sampled += rows;
    }

    /// Rows sampled per row inserted beyond the first `min_size` (the realized ratio).
    pub fn ratio(&self) -> f64 {
        let beyond = self.inserted.saturating_sub(self.min_size);
        if beyond == 0 {
            0.0
        } else {
            self.sampled as f64 / beyond as f64
        }
    }

    /// Counts so far: (inserted, sampled).
    pub fn counts(&self) -> (u64, u64) {
        (self.inserted, self.sampled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A learner loop against producers of different speeds: the band holds either way.
    #[test]
    fn the_band_holds_for_fast_and_slow_producers() {
        for produced_per_tick in [1u64, 7, 200] {
            let (spi, b, m, msg) = (2.0 * 32.0, 32u64, 100u64, 8u64);
            let mut r = RateLimiter::new(spi, m, spi * msg as f64 * 2.0);
            let mut backlog = 0u64;
            let mut updates = 0u64;
            for _ in 0..20_000 {
                backlog += produced_per_tick;
                // The learner: insert while allowed (whole messages), then update while allowed,
                // at most 4 updates a tick (its own speed).
                while backlog >= msg && r.can_insert(msg) {
                    r.inserted(msg);
                    backlog -= msg;
                }
                for _ in 0..4 {
                    if r.can_sample(b) {
                        r.sampled(b);
                        updates += 1;
                    }
                }
                let (i, s) = r.counts();
                if i >= m {
                    let off = s as f64 - spi * (i - m) as f64;
                    assert!(
                        off.abs() <= spi * msg as f64 * 2.0 + spi * msg as f64,
                        "producer {produced_per_tick}/tick: off by {off} rows"
                    );
                }
            }
            assert!(updates > 0);
            // Two updates of 32 rows per transition, realized.
            assert!((r.ratio() - spi).abs() / spi < 0.1, "producer {produced_per_tick}/tick: ratio {}", r.ratio());
        }
    }

    #[test]
    fn no_update_before_min_size_and_inserts_wait_for_updates() {
        let mut r = RateLimiter::new(1.0, 10, 5.0);
        r.inserted(9);
        assert!(!r.can_sample(1));
        r.inserted(1);
        assert!(r.can_sample(1) && r.can_insert(5) && !r.can_insert(6));
        r.inserted(5);
        assert!(!r.can_insert(1));
        r.sampled(3);
        assert!(r.can_insert(3) && !r.can_insert(4));
        let resumed = RateLimiter::new(1.0, 10, 5.0).with_counts(15, 3);
        assert_eq!(resumed, r);
    }
}
