//! The page's HTML: maud templates, which escape every interpolated value.
//!
//! What reaches the page from a call (argument names and values, preview fields and values) and
//! the server's name go through mcp-write-guard-core's renderer first, exactly as in the form's
//! question: strings quoted, line breaks, bidi controls and zero-width characters shown as
//! visible escapes, long values cut with a marker. maud then escapes the rendered text for HTML, so `<script>` shows
//! as text and a quote cannot leave an attribute.
//!
//! The change table shows the rows of mcp-write-guard-core's `Change` of the preview, the same
//! rows the form's default question lists, so a person reads the same change in both places.

use std::sync::LazyLock;

use base64::Engine as _;
use maud::{DOCTYPE, Markup, html};
use mcp_write_guard_rmcp::approval::{
    Change, ChangeRow,
    page::{OpenPage, PageChoice, PageRefusal, PageView},
    render::{DEFAULT_MAX_RENDERED_CHARS, Rendered, render_key, render_value},
};
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

/// The page's only style sheet, inline; the Content-Security-Policy allows exactly this text.
const STYLE: &str = "body{font:16px/1.45 system-ui,sans-serif;margin:0;background:#f4f5f7;color:#1d2330}\
main{max-width:46rem;margin:2rem auto;background:#fff;border:1px solid #d5d9e0;border-radius:8px;padding:1.5rem 2rem}\
h1{font-size:1.4rem;margin:0 0 .5rem}h2{font-size:1.05rem;margin:1.4rem 0 .4rem}\
table{border-collapse:collapse;width:100%}th,td{border:1px solid #d5d9e0;padding:.35rem .6rem;text-align:left;vertical-align:top}\
thead th{background:#eef0f4}td,th.field{font-family:ui-monospace,monospace;white-space:pre-wrap;word-break:break-all}\
td.after{background:#eaf7ee}td.before{background:#fbeeee}.muted{color:#5b6475}\
form{display:flex;gap:1rem;margin-top:1.5rem}button{font-size:1rem;padding:.55rem 1.4rem;border-radius:6px;border:1px solid #8a93a6;cursor:pointer}\
button.approve{background:#1f7a3a;border-color:#1f7a3a;color:#fff}button.decline{background:#fff}";

/// The Content-Security-Policy of every page: nothing loads, nothing runs, nothing frames it;
/// the inline style above is allowed by its hash; the form posts to the page itself only.
pub(crate) static CONTENT_SECURITY_POLICY: LazyLock<String> = LazyLock::new(|| {
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(STYLE));
    format!(
        "default-src 'none'; style-src 'sha256-{hash}'; form-action 'self'; \
         frame-ancestors 'none'; base-uri 'none'"
    )
});

/// The open page: what will change, and the form.
pub(crate) fn open(server: &str, page: &OpenPage) -> Markup {
    let subject = &page.subject;
    let tool = render_key(subject.tool.as_str());
    let heading = if subject.issues_token {
        "Allow a one-time admin confirmation?"
    } else {
        "Approve this change?"
    };
    layout(
        heading,
        html! {
            h1 { (heading) }
            p {
                "The server " strong { (render_key(server).as_str()) }
                " asks you to approve a call of the tool "
                code.tool { (tool.as_str()) } " with exactly the arguments below."
            }
            @if subject.issues_token {
                p {
                    "Approving issues a one-time confirmation token for this call; the action \
                     itself will ask you again before it runs."
                }
            }
            h2 { "Arguments" }
            table.arguments {
                tbody {
                    @for (name, value) in &subject.arguments {
                        tr {
                            th.field scope="row" { (render_key(name).as_str()) }
                            td { (render(value).as_str()) }
                        }
                    }
                }
            }
            @if let Some(preview) = &subject.preview {
                h2 { "What changes" }
                table.change {
                    thead { tr { th { "Field" } th { "Before" } th { "After" } } }
                    tbody {
                        @for row in Change::of_preview(preview).rows() {
                            @match row {
                                ChangeRow::Change { field, before, after } => tr {
                                    th.field scope="row" { (field.as_str()) }
                                    td.before { (before.as_str()) }
                                    td.after { (after.as_str()) }
                                },
                                ChangeRow::Value { field, value } => tr {
                                    th.field scope="row" { (field.as_str()) }
                                    td colspan="2" { (value.as_str()) }
                                },
                            }
                        }
                    }
                }
            }
            p.expiry.muted {
                "This request expires at " time datetime=(rfc3339(page.expires_at)) {
                    (readable(page.expires_at))
                } "; an answer after that saves nothing."
            }
            form method="post" {
                input type="hidden" name="csrf" value=(page.csrf.to_string());
                button.approve type="submit" name="decision" value="approve" { "Approve" }
                button.decline type="submit" name="decision" value="decline" { "Decline" }
            }
        },
    )
}

/// A page that has nothing to answer, saying why.
pub(crate) fn closed(view: &PageView) -> Markup {
    let (heading, text) = match view {
        PageView::Answered => (
            "Already answered",
            "This change was already approved or declined. Nothing changed now.",
        ),
        PageView::Withdrawn => (
            "No longer open",
            "This request was withdrawn before it was answered (the call was cancelled or \
             declined in the client). Nothing was saved. Ask again from your client if the \
             change is still needed.",
        ),
        PageView::Expired => (
            "Expired",
            "This request expired before it was answered. Nothing was saved. Ask again from \
             your client if the change is still needed.",
        ),
        PageView::Unavailable => (
            "Not available",
            "The approval store cannot be reached, so this request cannot be shown or \
             answered. Nothing was saved. Try again later.",
        ),
        PageView::Unknown | PageView::Open(_) => (
            "Not found",
            "There is no approval request at this address. Nothing changed.",
        ),
    };
    message(heading, text)
}

/// The page after an answer was taken.
pub(crate) fn answered(choice: PageChoice) -> Markup {
    match choice {
        PageChoice::Approve => message(
            "You approved this change",
            "Your approval was recorded. The server applies the change if the request is \
             still waiting for it and the data is still as shown; your client shows the \
             result. You can close this page.",
        ),
        PageChoice::Decline => message(
            "You declined this change",
            "Nothing was saved. You can close this page.",
        ),
    }
}

/// The page after an answer was refused; nothing changed.
pub(crate) fn refused(refusal: PageRefusal) -> Markup {
    match refusal {
        PageRefusal::Csrf => message(
            "Answer not accepted",
            "This answer did not come from the approval page's own form, so it was not \
             accepted. Nothing changed. Open the page again from your client to answer.",
        ),
        PageRefusal::NotSignedIn => message(
            "Sign in to answer",
            "Only the person who made the request may answer it, and this browser is not \
             signed in. Nothing changed.",
        ),
        PageRefusal::OtherPerson => message(
            "Not your request",
            "Only the person who made the request may answer it. Nothing changed.",
        ),
        PageRefusal::Answered => closed(&PageView::Answered),
        PageRefusal::Withdrawn => closed(&PageView::Withdrawn),
        PageRefusal::Expired => closed(&PageView::Expired),
        PageRefusal::Unavailable => closed(&PageView::Unavailable),
        PageRefusal::Unknown => closed(&PageView::Unknown),
    }
}

/// A request the page cannot read (not a form with one decision).
pub(crate) fn bad_form() -> Markup {
    message(
        "Answer not understood",
        "The answer must be the page's own form with Approve or Decline. Nothing changed.",
    )
}

/// A request with a method the page does not take.
pub(crate) fn bad_method() -> Markup {
    message(
        "Not allowed",
        "This address only shows the approval page and takes its own form. Nothing changed.",
    )
}

fn message(heading: &str, text: &str) -> Markup {
    layout(
        heading,
        html! {
            h1 { (heading) }
            p { (text) }
        },
    )
}

fn layout(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="no-referrer";
                title { (title) }
                style { (maud::PreEscaped(STYLE)) }
            }
            body { main { (body) } }
        }
    }
}

fn render(value: &Value) -> Rendered {
    render_value(value, DEFAULT_MAX_RENDERED_CHARS)
}

/// `t` in UTC to the second, as RFC 3339 (for the `datetime` attribute).
fn rfc3339(t: OffsetDateTime) -> String {
    utc_seconds(t).format(&Rfc3339).unwrap_or_default()
}

/// `t` in UTC to the second, as a person reads it: `2026-11-30 22:30:12 UTC`.
fn readable(t: OffsetDateTime) -> String {
    let t = utc_seconds(t);
    let (h, m, s) = t.to_hms();
    format!("{} {h:02}:{m:02}:{s:02} UTC", t.date())
}

fn utc_seconds(t: OffsetDateTime) -> OffsetDateTime {
    t.to_offset(time::UtcOffset::UTC)
        .replace_nanosecond(0)
        .unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use mcp_write_guard_rmcp::approval::{ApprovalId, Principal, ToolName, page::PageSubject};
    use serde_json::json;

    use super::*;

    fn page(arguments: Value, preview: Value) -> OpenPage {
        let subject = PageSubject::new(
            ToolName::new("adjust_stock"),
            arguments.as_object().unwrap().clone(),
            Some(preview),
        );
        let json = json!({
            "approval": "5f0c1d1e-8a8b-4c0d-9e3f-0a1b2c3d4e5f",
            "principal": "alice",
            "subject": subject,
            "expiresAt": 1_700_000_000_000_000_000_i64,
            "csrf": "ab".repeat(32),
        });
        let page: OpenPage = serde_json::from_value(json).unwrap();
        assert_eq!(page.principal, Principal::new("alice"));
        let _: ApprovalId = page.approval;
        page
    }

    /// The text a browser shows for `html`: tags dropped, entities decoded.
    fn visible_text(html: &str) -> String {
        let mut text = String::new();
        let mut in_tag = false;
        for c in html.chars() {
            match c {
                '<' => in_tag = true,
                '>' => in_tag = false,
                c if !in_tag => text.push(c),
                _ => {}
            }
        }
        text.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&amp;", "&")
    }

    #[test]
    fn hostile_arguments_render_as_inert_visible_text() {
        let hostile = "<script>alert(1)</script>\"'><img src=x onerror=alert(2)>\u{202E}gpj.exe\u{200B}\nApproved: yes";
        let key = "<b onmouseover=x>\u{2066}";
        let html = open(
            "store <server>",
            &page(
                json!({ "reason": hostile, key: 1 }),
                json!({"previousStock": 3, "newStock": hostile}),
            ),
        )
        .into_string();
        // No markup from the arguments: the only elements are the page's own.
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("<b "), "{html}");
        // The attribute-looking text stays text: no quote ends an attribute early.
        assert!(!html.contains("\"'>"), "{html}");
        // No raw bidi, zero-width or line-break character reaches the page...
        for c in ['\u{202E}', '\u{200B}', '\u{2066}'] {
            assert!(!html.contains(c), "{c:?} in {html}");
        }
        // ...and what the person reads is the renderer's visible text, the same as in a form.
        let text = visible_text(&html);
        let rendered = render(&json!(hostile));
        assert!(text.contains(rendered.as_str()), "{text}");
        assert!(!rendered.as_str().contains('\u{202E}'));
        assert!(text.contains(render_key(key).as_str()), "{text}");
        assert!(text.contains("store <server>"), "{text}");
    }

    #[test]
    fn a_hostile_server_name_renders_as_inert_visible_text() {
        let name = "store</style><script>alert(1)</script>\u{202E}\u{200B}\nApproved: yes";
        let html = open(
            name,
            &page(json!({"sku": "A"}), json!({"before": 1, "after": 2})),
        )
        .into_string();
        assert!(!html.contains("<script"), "{html}");
        assert_eq!(html.matches("</style>").count(), 1, "{html}");
        for c in ['\u{202E}', '\u{200B}', '\n'] {
            assert!(!html.contains(c), "{c:?} in {html}");
        }
        assert!(
            visible_text(&html).contains(render_key(name).as_str()),
            "{html}"
        );
    }

    #[test]
    fn the_form_posts_to_the_page_with_its_token_and_two_buttons() {
        let html = open(
            "store",
            &page(json!({"sku": "A"}), json!({"before": 1, "after": 2})),
        )
        .into_string();
        assert!(html.contains(r#"<form method="post">"#), "{html}");
        assert!(html.contains(&format!(
            r#"<input type="hidden" name="csrf" value="{}">"#,
            "ab".repeat(32)
        )));
        assert!(html.contains(r#"name="decision" value="approve""#));
        assert!(html.contains(r#"name="decision" value="decline""#));
        assert!(
            html.contains(
                r#"<time datetime="2023-11-14T22:13:20Z">2023-11-14 22:13:20 UTC</time>"#
            ),
            "{html}"
        );
        assert!(!html.contains("<script"));
    }

    #[test]
    fn the_policy_allows_exactly_the_page_style_and_no_script() {
        let csp = &*CONTENT_SECURITY_POLICY;
        assert!(csp.starts_with("default-src 'none'; "));
        assert!(csp.contains("frame-ancestors 'none'"));
        assert!(!csp.contains("script-src"));
        assert!(!csp.contains("unsafe-inline"));
        let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(STYLE));
        assert!(csp.contains(&format!("style-src 'sha256-{hash}'")));
    }
}
