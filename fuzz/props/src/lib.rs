//! The properties the fuzz targets check (issue 14), as plain functions over bytes.
//!
//! Each `check_<target>` decodes its input the way the product meets it (bytes to
//! `serde_json::from_slice`, or to text with `std::str::from_utf8` / lossily; where a property
//! needs two inputs, the bytes are split at the first `0xFF`, which UTF-8 never contains), runs
//! the product's own parsers and decisions on it, and **asserts properties**: a property that
//! does not hold panics with a message that starts with the target's name. A panic inside the
//! product is a failure too.
//!
//! The same functions serve twice: `fuzz/fuzz_targets/<target>.rs` hands them libFuzzer's
//! inputs (`cargo +nightly fuzz run <target>`, from `fuzz/`), and `tests/corpus.rs` replays
//! every committed input in `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` as an
//! ordinary test (`cargo test -p mcp-write-guard-fuzz-props`). `fuzz/README.md` lists what each
//! target checks.
//!
//! | target | the product under test |
//! |---|---|
//! | [`check_capture`] | `CapturedArgs::capture`, `capture_value`, `capture_owned` |
//! | [`check_canonical`] | `canonical_json`, against `serde_json_canonicalizer` |
//! | [`check_envelope`] | `wrap`, `unwrap`, `render_text`, `parse_text`, `wrap_text` |
//! | [`check_answer`] | `AnswerAction::from_wire`, `decide_answer`, `PendingApproval::decide` |
//! | [`check_ids`] | every id's `FromStr`, `requestState`, stored approvals, pages, tokens |
//! | [`check_render`] | `render_value`, `render_key` |
//! | [`check_tools_list`] | mcp-audit's `ToolsList::from_results`, `surface_report` |
//!
//! ```
//! // A property holds: nothing happens.
//! let answer = br#"{"action": "accept", "content": {"approve": true}}"#;
//! mcp_write_guard_fuzz_props::check_answer(answer);
//! // Input that is not JSON is not an answer: nothing to check.
//! mcp_write_guard_fuzz_props::check_answer(b"\xFF");
//! ```

mod answer;
mod canonical;
mod capture;
mod envelope;
mod ids;
mod render;
mod support;
mod tools_list;

pub use answer::check_answer;
pub use canonical::check_canonical;
pub use capture::check_capture;
pub use envelope::check_envelope;
pub use ids::check_ids;
pub use render::check_render;
pub use tools_list::check_tools_list;

/// A target's property check.
pub type Check = fn(&[u8]);

/// Every target by name, for tools that go over all of them (the corpus replay).
pub const TARGETS: [(&str, Check); 7] = [
    ("capture", check_capture),
    ("canonical", check_canonical),
    ("envelope", check_envelope),
    ("answer", check_answer),
    ("ids", check_ids),
    ("render", check_render),
    ("tools_list", check_tools_list),
];
