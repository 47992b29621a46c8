//! When to try again, and how long to wait first. Pure: the notifier acts on these answers.

use std::time::Duration;

/// What one attempt's outcome means for the delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Delivered: stop.
    Delivered,
    /// Worth another attempt, if any is left (no answer, a timeout, a 5xx).
    Retry,
    /// Will not get better by asking again (a 4xx, a redirect, anything else): stop, failed.
    Final,
}

/// The verdict on an HTTP status: 2xx delivered, 5xx retried, anything else final (a redirect
/// is not followed: the receiver must be configured at its own URL).
pub(crate) fn on_status(status: u16) -> Verdict {
    match status {
        200..=299 => Verdict::Delivered,
        500..=599 => Verdict::Retry,
        _ => Verdict::Final,
    }
}

/// The first pause, before the second attempt.
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_millis(200);

/// The longest pause between two attempts.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The pause before retry number `retry` (1 for the second attempt): 200 ms, doubled each time,
/// at most [`MAX_BACKOFF`].
pub(crate) fn backoff(retry: u32) -> Duration {
    let doublings = retry.saturating_sub(1).min(16);
    FIRST_BACKOFF
        .checked_mul(1 << doublings)
        .map_or(MAX_BACKOFF, |pause| pause.min(MAX_BACKOFF))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses() {
        let table = [
            (200, Verdict::Delivered),
            (201, Verdict::Delivered),
            (204, Verdict::Delivered),
            (299, Verdict::Delivered),
            (100, Verdict::Final),
            (301, Verdict::Final),
            (302, Verdict::Final),
            (307, Verdict::Final),
            (400, Verdict::Final),
            (401, Verdict::Final),
            (404, Verdict::Final),
            (429, Verdict::Final),
            (499, Verdict::Final),
            (500, Verdict::Retry),
            (502, Verdict::Retry),
            (503, Verdict::Retry),
            (599, Verdict::Retry),
            (600, Verdict::Final),
        ];
        for (status, verdict) in table {
            assert_eq!(on_status(status), verdict, "{status}");
        }
    }

    #[test]
    fn backoffs() {
        let ms = |n| Duration::from_millis(n);
        assert_eq!(backoff(1), ms(200));
        assert_eq!(backoff(2), ms(400));
        assert_eq!(backoff(3), ms(800));
        assert_eq!(backoff(4), ms(1600));
        assert_eq!(backoff(5), MAX_BACKOFF);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
        assert_eq!(backoff(0), ms(200));
    }
}
