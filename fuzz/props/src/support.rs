//! What several targets share: splitting the input, measuring values, a fixed `now`, polling
//! the memory store's futures.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use serde_json::Value;
use time::OffsetDateTime;

/// Splits `data` at its first `0xFF` byte (which never occurs in UTF-8): the bytes before it and
/// the bytes after it. Without one, everything is before and nothing after.
pub(crate) fn split(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == 0xFF) {
        Some(at) => (
            data.get(..at).unwrap_or_default(),
            data.get(at + 1..).unwrap_or_default(),
        ),
        None => (data, &[]),
    }
}

/// The nesting of `value` in containers (`1` and `"x"` are 0, `{}` and `[1]` are 1), counted
/// without recursion.
pub(crate) fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0_usize)];
    while let Some((value, outer)) = stack.pop() {
        let inner = outer + 1;
        match value {
            Value::Array(items) => {
                deepest = deepest.max(inner);
                stack.extend(items.iter().map(|item| (item, inner)));
            }
            Value::Object(map) => {
                deepest = deepest.max(inner);
                stack.extend(map.values().map(|item| (item, inner)));
            }
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
        }
    }
    deepest
}

/// Whether `value` holds an integer that no IEEE-754 double equals (the canonical form refuses
/// those rather than round them).
pub(crate) fn has_inexact_integer(value: &Value) -> bool {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::Number(n) => {
                let integer = n
                    .as_i64()
                    .map(i128::from)
                    .or_else(|| n.as_u64().map(i128::from));
                if let Some(i) = integer {
                    #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
                    let back = i as f64 as i128;
                    if back != i {
                        return true;
                    }
                }
            }
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            Value::Null | Value::Bool(_) | Value::String(_) => {}
        }
    }
    false
}

/// A property does not hold: panics with `message`, which is what libFuzzer records as a
/// crash and what a test sees as a failure.
#[allow(
    clippy::panic,
    reason = "a property that does not hold is a panic: the fuzzer and the tests look for it"
)]
pub(crate) fn fail(message: std::fmt::Arguments<'_>) -> ! {
    panic!("{message}")
}

/// A fixed instant (2026-01-01T00:00:00Z): every run of an input is the same run.
pub(crate) fn t0() -> OffsetDateTime {
    OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(1_767_225_600)
}

/// Polls `future` to completion. The memory store's futures are ready at once.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn split_at_the_first_ff() {
        assert_eq!(split(b"ab\xFFcd\xFFe"), (&b"ab"[..], &b"cd\xFFe"[..]));
        assert_eq!(split(b"abc"), (&b"abc"[..], &b""[..]));
        assert_eq!(split(b"\xFF"), (&b""[..], &b""[..]));
    }

    #[test]
    fn depth_counts_containers() {
        assert_eq!(depth(&json!(1)), 0);
        assert_eq!(depth(&json!({})), 1);
        assert_eq!(depth(&json!({"a": [1, {"b": []}]})), 4);
    }

    #[test]
    fn inexact_integers() {
        assert!(!has_inexact_integer(&json!([9007199254740992u64, -7, 1.5])));
        assert!(has_inexact_integer(&json!({"a": [9007199254740993u64]})));
        assert!(has_inexact_integer(&json!(i64::MAX)));
        assert!(!has_inexact_integer(&json!(i64::MIN)));
    }
}
