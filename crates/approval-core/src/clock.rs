//! Where `now` comes from. The core never reads a clock; the adapter owns one and passes `now` in.

use std::sync::Arc;

use time::OffsetDateTime;

/// A source of the current time. The adapter calls [`Clock::now`] once per decision and passes
/// the value to this crate's functions.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> OffsetDateTime;
}

/// The operating system's wall clock (UTC).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> OffsetDateTime {
        (**self).now()
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> OffsetDateTime {
        (**self).now()
    }
}

/// A clock that moves only when told to, for tests (ours and those of crates that depend on
/// this one, through the `test-util` feature). Clones share the same time.
///
/// ```
/// # #[cfg(feature = "test-util")] {
/// use mcp_write_guard_core::{Clock, ManualClock};
/// use time::Duration;
///
/// let clock = ManualClock::default();
/// let start = clock.now();
/// let shared = clock.clone();
/// clock.advance(Duration::seconds(120));
/// assert_eq!(shared.now() - start, Duration::seconds(120));
/// # }
/// ```
#[cfg(any(test, feature = "test-util"))]
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<parking_lot::Mutex<OffsetDateTime>>,
}

#[cfg(any(test, feature = "test-util"))]
impl ManualClock {
    /// A clock showing `start`.
    pub fn new(start: OffsetDateTime) -> Self {
        Self {
            now: Arc::new(parking_lot::Mutex::new(start)),
        }
    }

    /// Moves the clock by `by` (backwards if negative), saturating at the ends of the range.
    pub fn advance(&self, by: time::Duration) {
        let mut now = self.now.lock();
        *now = now.saturating_add(by);
    }

    /// Sets the clock to `to`.
    pub fn set(&self, to: OffsetDateTime) {
        *self.now.lock() = to;
    }
}

#[cfg(any(test, feature = "test-util"))]
impl Default for ManualClock {
    /// Starts at 2026-01-01T00:00:00Z.
    fn default() -> Self {
        Self::new(
            OffsetDateTime::from_unix_timestamp(1_767_225_600)
                .unwrap_or(OffsetDateTime::UNIX_EPOCH),
        )
    }
}

#[cfg(any(test, feature = "test-util"))]
impl Clock for ManualClock {
    fn now(&self) -> OffsetDateTime {
        *self.now.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::Duration;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::default();
        let t0 = clock.now();
        assert_eq!(clock.now(), t0);
        clock.advance(Duration::seconds(299));
        assert_eq!(clock.now() - t0, Duration::seconds(299));
        clock.advance(Duration::seconds(-299));
        assert_eq!(clock.now(), t0);
        clock.set(OffsetDateTime::UNIX_EPOCH);
        assert_eq!(clock.now(), OffsetDateTime::UNIX_EPOCH);
    }

    #[test]
    fn clocks_are_object_safe_and_shareable() {
        let manual = ManualClock::default();
        let dyn_clock: Arc<dyn Clock> = Arc::new(manual.clone());
        manual.advance(Duration::seconds(5));
        assert_eq!(dyn_clock.now(), manual.now());
        let system: Arc<dyn Clock> = Arc::new(SystemClock);
        assert!(system.now() > OffsetDateTime::UNIX_EPOCH);
    }
}
