//! The body's signature: `X-Signature-256: sha256=<hex>`, GitHub's form.
//!
//! The value is the lowercase hex of HMAC-SHA256 keyed with the shared secret over the exact
//! bytes of the body, after `sha256=`. Signing and checking are pure: no IO, no clock.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// HMAC-SHA256, keyed once when the notifier is built.
pub(crate) type HmacSha256 = Hmac<Sha256>;

/// The header that carries the signature.
pub const SIGNATURE_HEADER: &str = "X-Signature-256";

/// What comes before the hex in the header's value.
const PREFIX: &str = "sha256=";

/// The length of the hex of a SHA-256 output.
const HEX_LEN: usize = 64;

/// An HMAC-SHA256 keyed with `secret`, or `None` for an empty secret (anyone can sign with an
/// empty key; HMAC pads a key with zero bytes, so a key of zero bytes only is the empty key too)
/// or a key the hmac crate refuses (it takes keys of any length).
pub(crate) fn keyed(secret: &[u8]) -> Option<HmacSha256> {
    if is_empty_key(secret) {
        return None;
    }
    HmacSha256::new_from_slice(secret).ok()
}

/// Whether HMAC treats `secret` as the empty key: no bytes, or zero bytes only.
pub(crate) fn is_empty_key(secret: &[u8]) -> bool {
    secret.iter().all(|&b| b == 0)
}

/// The header value for `body`: `sha256=` and the lowercase hex of its HMAC.
pub(crate) fn header_value(mac: &HmacSha256, body: &[u8]) -> String {
    let mut mac = mac.clone();
    mac.update(body);
    let tag = mac.finalize().into_bytes();
    format!("{PREFIX}{}", hex::encode(tag))
}

/// Whether `header_value` is the signature of `body` under `secret`: for a receiver, to check
/// a delivery before trusting it.
///
/// Accepts only the exact form the notifier sends, `sha256=` followed by 64 lowercase hex
/// digits (no white space, no other prefix, no uppercase), and compares the tags in constant
/// time (hmac's `verify_slice`). An empty `secret` (or one of zero bytes only, which HMAC
/// treats as empty) verifies nothing: anyone can sign with an empty key.
///
/// Pass the body exactly as it arrived, before any JSON parsing. A valid signature says the
/// body came from a holder of the secret; it does not say the body is new: drop a delivery
/// whose `sentAt` is too old, or whose `approvalId` was already handled.
///
/// ```
/// use mcp_write_guard_webhook::verify_signature;
///
/// let body = br#"{"approvalId":"..."}"#;
/// assert!(!verify_signature(b"secret", body, "sha256=00"));
/// assert!(!verify_signature(b"", body, "sha256=00"));
/// ```
pub fn verify_signature(secret: &[u8], body: &[u8], header_value: &str) -> bool {
    let Some(digits) = header_value.strip_prefix(PREFIX) else {
        return false;
    };
    let well_formed = digits.len() == HEX_LEN
        && digits
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !well_formed {
        return false;
    }
    let Ok(tag) = hex::decode(digits) else {
        return false;
    };
    let Some(mut mac) = keyed(secret) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&tag).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sign(secret: &[u8], body: &[u8]) -> String {
        header_value(&keyed(secret).unwrap(), body)
    }

    #[test]
    fn matches_rfc_4231_test_case_2() {
        // RFC 4231, test case 2: key "Jefe", data "what do ya want for nothing?".
        assert_eq!(
            sign(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn accepts_only_the_exact_form() {
        let secret = b"s3cret";
        let body = br#"{"text":"hi"}"#;
        let good = sign(secret, body);
        assert!(verify_signature(secret, body, &good));

        let digits = good.strip_prefix("sha256=").unwrap();
        let refused = [
            digits.to_owned(),                           // no prefix
            format!("sha256={}", digits.to_uppercase()), // uppercase hex
            format!("SHA256={digits}"),                  // prefix in capitals
            format!("sha256= {digits}"),                 // white space
            format!("{good} "),                          // trailing space
            format!("sha256={}", &digits[..62]),         // too short
            format!("{good}00"),                         // too long
            format!("sha1={digits}"),                    // another algorithm
            format!("sha256={}g", &digits[..63]),        // not hex
            String::new(),
        ];
        for value in refused {
            assert!(!verify_signature(secret, body, &value), "{value:?}");
        }
        assert!(!verify_signature(b"other", body, &good), "wrong secret");
    }

    #[test]
    fn an_empty_secret_neither_signs_nor_verifies() {
        assert!(keyed(b"").is_none());
        assert!(keyed(&[0, 0, 0]).is_none());
        assert!(keyed(&[0, 1]).is_some());
        // The HMAC of the body under the empty key, computed by hand.
        let mut mac = HmacSha256::new_from_slice(b"").unwrap();
        mac.update(b"body");
        let forged = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
        assert!(!verify_signature(b"", b"body", &forged));
        assert!(!verify_signature(&[0; 16], b"body", &forged));
    }

    proptest! {
        #[test]
        fn a_signature_verifies_and_any_flipped_bit_fails(
            secret in proptest::collection::vec(any::<u8>(), 1..80),
            body in proptest::collection::vec(any::<u8>(), 1..512),
            position in any::<proptest::sample::Index>(),
            bit in 0u8..8,
        ) {
            let header = sign(&secret, &body);
            prop_assert!(verify_signature(&secret, &body, &header));

            let mut changed = body.clone();
            let at = position.index(changed.len());
            changed[at] ^= 1 << bit;
            prop_assert!(!verify_signature(&secret, &changed, &header));
        }

        #[test]
        fn another_secret_fails(
            secret in proptest::collection::vec(any::<u8>(), 1..=64),
            other in proptest::collection::vec(any::<u8>(), 1..=64),
            body in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            // HMAC pads a key up to the hash's block (64 bytes) with zeros, so keys that differ
            // only by trailing zeros are the same key.
            let trimmed = |key: &[u8]| {
                let end = key.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
                key[..end].to_vec()
            };
            prop_assume!(trimmed(&secret) != trimmed(&other));
            prop_assert!(!verify_signature(&other, &body, &sign(&secret, &body)));
        }
    }
}
