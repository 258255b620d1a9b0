//! When to restart a failed server: exponential backoff with jitter, a reset after sustained
//! uptime, and a crash-loop limit. Pure arithmetic; the lifecycle task does the waiting.

use std::time::Duration;

use crate::config::SupervisorConfig;

/// Restart decisions for one server.
#[derive(Debug, Clone)]
pub struct RestartPolicy {
    base: Duration,
    max: Duration,
    limit: u32,
    healthy_after: Duration,
}

impl RestartPolicy {
    /// The policy proxy.toml's `[supervisor]` describes.
    pub fn new(config: &SupervisorConfig) -> Self {
        Self {
            base: config.restart_delay,
            max: config.restart_delay_max.max(config.restart_delay),
            limit: config.crash_loop_limit.max(1),
            healthy_after: config.healthy_after,
        }
    }

    /// The failure count after a run that lasted `uptime` and then failed: a run longer than
    /// the healthy threshold starts the count again.
    pub fn count_failure(&self, failures: u32, uptime: Option<Duration>) -> u32 {
        match uptime {
            Some(up) if up >= self.healthy_after => 1,
            _ => failures.saturating_add(1),
        }
    }

    /// Whether `failures` consecutive failures mean "stop trying until asked".
    pub fn gives_up(&self, failures: u32) -> bool {
        failures >= self.limit
    }

    /// The crash-loop limit.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Delay before restart number `failures` (1-based): `base * 2^(failures-1)`, capped at
    /// the maximum, then scaled by a jitter factor in `0.75..1.25` from `unit` (in `0..1`).
    pub fn delay(&self, failures: u32, unit: f64) -> Duration {
        let doublings = failures.saturating_sub(1).min(32);
        let raw = self
            .base
            .saturating_mul(1u32 << doublings.min(31))
            .min(self.max);
        let factor = 0.75 + 0.5 * unit.clamp(0.0, 1.0);
        raw.mul_f64(factor).min(self.max)
    }
}

/// A small xorshift generator for jitter: no shared state, no extra dependency.
#[derive(Debug, Clone)]
pub struct Jitter(u64);

impl Jitter {
    /// Seeded from `seed` (e.g. a hash of the server id mixed with the clock).
    pub fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    /// The next value in `0..1`.
    pub fn next_unit(&mut self) -> f64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RestartPolicy {
        RestartPolicy::new(&SupervisorConfig {
            restart_delay: Duration::from_millis(100),
            restart_delay_max: Duration::from_millis(1000),
            crash_loop_limit: 4,
            healthy_after: Duration::from_secs(10),
            ..SupervisorConfig::default()
        })
    }

    #[test]
    fn delays_double_up_to_the_cap() {
        let p = policy();
        let mid = |n| p.delay(n, 0.5);
        assert_eq!(mid(1), Duration::from_millis(100));
        assert_eq!(mid(2), Duration::from_millis(200));
        assert_eq!(mid(3), Duration::from_millis(400));
        assert_eq!(mid(5), Duration::from_millis(1000));
        assert_eq!(mid(u32::MAX), Duration::from_millis(1000));
    }

    #[test]
    fn jitter_stays_within_a_quarter_and_under_the_cap() {
        let p = policy();
        assert_eq!(p.delay(1, 0.0), Duration::from_millis(75));
        assert_eq!(p.delay(1, 1.0), Duration::from_millis(125));
        assert_eq!(p.delay(9, 1.0), Duration::from_millis(1000));
        let mut jitter = Jitter::new(42);
        for _ in 0..1000 {
            let u = jitter.next_unit();
            assert!((0.0..1.0).contains(&u), "{u}");
        }
    }

    #[test]
    fn sustained_uptime_resets_the_count_and_the_limit_stops_retries() {
        let p = policy();
        assert_eq!(p.count_failure(3, Some(Duration::from_secs(11))), 1);
        assert_eq!(p.count_failure(3, Some(Duration::from_secs(1))), 4);
        assert_eq!(p.count_failure(3, None), 4);
        assert!(!p.gives_up(3));
        assert!(p.gives_up(4));
    }
}
