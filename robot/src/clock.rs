//! Time for the control loop: a monotonic [`RealClock`] for hardware and a [`FakeClock`] for
//! tests and lock-step simulation.
//!
//! Every part of the robot stack (the control loop's deadlines, the watchdog, a simulated
//! driver's latency) reads time through [`Clock`], so a test can stall a policy for exactly
//! 1.7 periods and check what the arm did, with no sleeping and no flakiness.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A monotonic clock: time since the clock was made.
pub trait Clock: Send + Sync {
    /// Time since the clock's origin; never decreases.
    fn now(&self) -> Duration;
    /// Block until `now() >= t` (returns at once when it already is).
    fn sleep_until(&self, t: Duration);
    /// Whether time passes by itself (false for a [`FakeClock`]).
    fn is_real(&self) -> bool;
    /// Block for `d` (a fake clock jumps by `d`: how a simulated driver's latency takes time).
    fn sleep_for(&self, d: Duration) {
        self.sleep_until(self.now() + d)
    }
}

/// The machine's monotonic clock ([`Instant`]), shared by clones.
#[derive(Debug, Clone)]
pub struct RealClock {
    origin: Instant,
}

impl RealClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Self { origin: Instant::now() }
    }
}

impl Default for RealClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for RealClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn sleep_until(&self, t: Duration) {
        let now = self.now();
        if t > now {
            std::thread::sleep(t - now);
        }
    }

    fn is_real(&self) -> bool {
        true
    }
}

/// A clock that moves only when told: [`FakeClock::advance`], or a `sleep_until` (which jumps to
/// the deadline, as if the sleep took exactly that long). Clones share one time.
#[derive(Debug, Clone, Default)]
pub struct FakeClock {
    now: Arc<Mutex<Duration>>,
}

impl FakeClock {
    /// A fake clock at time 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Move time forward by `d` (e.g. the time a driver call or a policy takes).
    pub fn advance(&self, d: Duration) {
        let mut now = self.now.lock().unwrap_or_else(|p| p.into_inner());
        *now += d;
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Duration {
        *self.now.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn sleep_until(&self, t: Duration) {
        let mut now = self.now.lock().unwrap_or_else(|p| p.into_inner());
        if t > *now {
            *now = t;
        }
    }

    fn is_real(&self) -> bool {
        false
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Duration {
        (**self).now()
    }
    fn sleep_until(&self, t: Duration) {
        (**self).sleep_until(t)
    }
    fn is_real(&self) -> bool {
        (**self).is_real()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_clock_moves_only_when_told_and_clones_share_it() {
        let c = FakeClock::new();
        let d = c.clone();
        assert_eq!(c.now(), Duration::ZERO);
        c.advance(Duration::from_millis(30));
        assert_eq!(d.now(), Duration::from_millis(30));
        d.sleep_until(Duration::from_millis(100));
        assert_eq!(c.now(), Duration::from_millis(100));
        // sleeping into the past changes nothing
        c.sleep_until(Duration::from_millis(50));
        assert_eq!(c.now(), Duration::from_millis(100));
    }

    #[test]
    fn real_clock_is_monotonic_and_sleeps() {
        let c = RealClock::new();
        let a = c.now();
        c.sleep_until(a + Duration::from_millis(5));
        assert!(c.now() >= a + Duration::from_millis(5));
    }
}
