//! The body: one JSON object, built from a [`Notice`] and the time of sending. Pure.

use mcp_write_guard_rmcp::notify::Notice;
use serde::Serialize;
use time::{OffsetDateTime, UtcOffset, format_description::well_known::Rfc3339};

/// The JSON body, fields in this order, names in camelCase.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Payload<'a> {
    approval_id: String,
    server: &'a str,
    tool: &'a str,
    prompt: &'a str,
    url: &'a str,
    expires_at: String,
    sent_at: String,
    text: String,
}

/// Why a body could not be built (for the audit record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BodyError(pub(crate) &'static str);

/// The exact bytes sent (and signed) for `notice`, sent at `sent_at`.
pub(crate) fn body(notice: &Notice, sent_at: OffsetDateTime) -> Result<Vec<u8>, BodyError> {
    let expires_at =
        rfc3339(notice.expires_at).ok_or(BodyError("the expiry cannot be written as rfc 3339"))?;
    let sent_at = rfc3339(sent_at).ok_or(BodyError(
        "the time of sending cannot be written as rfc 3339",
    ))?;
    let payload = Payload {
        approval_id: notice.approval_id.to_string(),
        server: &notice.server,
        tool: &notice.tool,
        prompt: &notice.prompt,
        url: &notice.url,
        text: text(&notice.prompt, &notice.url, &expires_at),
        expires_at,
        sent_at,
    };
    serde_json::to_vec(&payload).map_err(|_| BodyError("the body cannot be written as json"))
}

/// `at` in UTC as RFC 3339 (`2026-01-01T00:02:00Z`), or `None` outside the years 0 to 9999.
fn rfc3339(at: OffsetDateTime) -> Option<String> {
    at.to_offset(UtcOffset::UTC).format(&Rfc3339).ok()
}

/// The message a chat shows: the question, the link, the expiry.
///
/// Escaped for Slack's message format (and Mattermost's Slack-compatible webhooks): `&`, `<` and
/// `>` become `&amp;`, `&lt;` and `&gt;`, so an argument cannot write a disguised link
/// (`<https://…|Approve>`) or a mention (`<!channel>`). A Markdown renderer shows the entities as
/// the characters.
pub(crate) fn text(prompt: &str, url: &str, expires_at: &str) -> String {
    let message =
        format!("{prompt}\n\nApprove or decline: {url}\nThe question expires at {expires_at}.");
    escape_slack(&message)
}

/// Slack's three control characters as entities.
fn escape_slack(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn notice() -> Notice {
        mcp_write_guard_rmcp::test_util::notice("https://approve.example/a/abc?t=1&u=2")
    }

    #[test]
    fn the_body_has_every_field_in_order() {
        let sent = OffsetDateTime::from_unix_timestamp(1_767_225_600)
            .unwrap()
            .to_offset(UtcOffset::from_hms(2, 0, 0).unwrap());
        let bytes = body(&notice(), sent).unwrap();
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            value,
            json!({
                "approvalId": "0b7f3a52-2c1e-4f4e-9a51-3c6d2e8f9a10",
                "server": "inventory",
                "tool": "adjust_stock",
                "prompt": "Adjust \"TLS-002\": stock 3 -> 1?",
                "url": "https://approve.example/a/abc?t=1&u=2",
                "expiresAt": "2026-01-01T00:02:00Z",
                "sentAt": "2026-01-01T00:00:00Z",
                "text": "Adjust \"TLS-002\": stock 3 -&gt; 1?\n\nApprove or decline: \
                         https://approve.example/a/abc?t=1&amp;u=2\n\
                         The question expires at 2026-01-01T00:02:00Z.",
            })
        );
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.starts_with(r#"{"approvalId":"#), "{text}");
    }

    #[test]
    fn slack_control_characters_are_escaped_in_the_text_only() {
        let mut notice = notice();
        notice.prompt = "Rename to \"<!channel> <https://evil.example|Approve> & co\"".into();
        let value: Value =
            serde_json::from_slice(&body(&notice, OffsetDateTime::UNIX_EPOCH).unwrap()).unwrap();
        assert_eq!(value["prompt"], notice.prompt.as_str());
        let text = value["text"].as_str().unwrap();
        assert!(text.starts_with(
            "Rename to \"&lt;!channel&gt; &lt;https://evil.example|Approve&gt; &amp; co\""
        ));
        assert!(!text.contains('<') && !text.contains('>'));
    }

    #[test]
    fn a_time_outside_rfc_3339_is_an_error() {
        let mut notice = notice();
        notice.expires_at = OffsetDateTime::from_unix_timestamp(-62_200_000_000).unwrap();
        assert_eq!(
            body(&notice, OffsetDateTime::UNIX_EPOCH),
            Err(BodyError("the expiry cannot be written as rfc 3339"))
        );
    }
}
