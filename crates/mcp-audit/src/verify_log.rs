//! `mcp-audit verify-log`: checks the chain of an audit file written by the guard's
//! `JsonLinesSink` (one JSON record a line, each with `seq` and `prev`, the SHA-256 of the line
//! before it), and tells one approval's story.
//!
//! The files are read in the order given (an old file, then the one that continues it) and
//! checked as one chain: `seq` goes up by one from record to record, and each `prev` is the
//! hash of the exact bytes of the line before it. The first record's `prev` is taken as given
//! (it names the file before, or 64 zeros); the report prints it and the last hash, so they can
//! be compared with a copy kept elsewhere.

use std::path::{Path, PathBuf};

use hmac::{Hmac, KeyInit, Mac};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::error::AuditError;

/// What the chain of the files says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LogReport {
    /// How many records were read.
    pub records: usize,
    /// The first record's `seq` and `prev` (the hash of the record before it, in a file not
    /// given, or 64 zeros at the start of a chain).
    pub first: Option<(u64, String)>,
    /// The last record's `seq` and the hash of its line: what the next record will name.
    pub last: Option<(u64, String)>,
    /// The first break in the chain, naming the record, its file and line; `None` when intact.
    pub broken: Option<String>,
}

/// One line of an audit file, as far as the chain goes.
struct Link {
    file: PathBuf,
    /// 1-based.
    line: usize,
    seq: u64,
    prev: String,
    hash: String,
    record: Value,
}

impl Link {
    fn at(&self) -> String {
        format!("line {} of {}", self.line, self.file.display())
    }
}

/// Reads and checks `files` as one chain.
///
/// # Errors
/// [`AuditError::ReadFile`] when a file cannot be read.
pub fn verify_log(files: &[PathBuf]) -> Result<LogReport, AuditError> {
    verify_log_keyed(files, None)
}

/// [`verify_log`] for a chain written with a key (`JsonLinesSink::open_keyed`): each `prev` is
/// the HMAC-SHA-256 of the line before under `key`. A wrong key breaks the chain at its second
/// record.
///
/// # Errors
/// [`AuditError::ReadFile`] when a file cannot be read.
pub fn verify_log_keyed(files: &[PathBuf], key: Option<&[u8]>) -> Result<LogReport, AuditError> {
    let (links, cut) = read_links(files, key)?;
    let broken = cut.or_else(|| first_break(&links));
    Ok(LogReport {
        records: links.len(),
        first: links.first().map(|l| (l.seq, l.prev.clone())),
        last: links.last().map(|l| (l.seq, l.hash.clone())),
        broken,
    })
}

/// Every record of `files` whose chain fields can be read, and the first line that cannot be
/// (not JSON, no `seq` or `prev`, cut short): the report names it, and reading stops there.
fn read_links(
    files: &[PathBuf],
    key: Option<&[u8]>,
) -> Result<(Vec<Link>, Option<String>), AuditError> {
    let mut links = Vec::new();
    for file in files {
        let bytes = read(file)?;
        let ends_whole = bytes.is_empty() || bytes.ends_with(b"\n");
        let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
        lines.pop(); // after the last line break: empty, or a cut line (below)
        for (i, line) in lines.iter().enumerate() {
            let at = format!("line {} of {}", i + 1, file.display());
            let Some(link) = link(file, i + 1, line, key) else {
                return Ok((
                    links,
                    Some(format!(
                        "{at} is not a chained audit record: changed, or inserted"
                    )),
                ));
            };
            links.push(link);
        }
        if !ends_whole {
            let line = lines.len() + 1;
            return Ok((
                links,
                Some(format!(
                    "line {line} of {} is cut short (no line break): the last record was \
                     truncated, or is still being written",
                    file.display()
                )),
            ));
        }
    }
    Ok((links, None))
}

fn read(file: &Path) -> Result<Vec<u8>, AuditError> {
    std::fs::read(file).map_err(|source| AuditError::ReadFile {
        path: file.to_owned(),
        source,
    })
}

fn link(file: &Path, line: usize, bytes: &[u8], key: Option<&[u8]>) -> Option<Link> {
    let record: Value = serde_json::from_slice(bytes).ok()?;
    let seq = record.get("seq")?.as_u64()?;
    let prev = record.get("prev")?.as_str()?.to_owned();
    let hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
    if prev.len() != 64 || !prev.chars().all(hex) {
        return None;
    }
    Some(Link {
        file: file.to_owned(),
        line,
        seq,
        prev,
        hash: match key.and_then(|key| <Hmac<Sha256> as KeyInit>::new_from_slice(key).ok()) {
            Some(mut mac) => {
                mac.update(bytes);
                hex::encode(mac.finalize().into_bytes())
            }
            None => hex::encode(Sha256::digest(bytes)),
        },
        record,
    })
}

/// The first record where the chain breaks, and how.
fn first_break(links: &[Link]) -> Option<String> {
    let first = links.first()?.seq;
    for (i, link) in links.iter().enumerate() {
        let expected = first.saturating_add(u64::try_from(i).unwrap_or(u64::MAX));
        if link.seq != expected {
            let later = links.iter().skip(i + 1).find(|l| l.seq == expected);
            return Some(match later {
                _ if link.seq < expected => format!(
                    "record {} at {} was inserted: record {expected} belongs there",
                    link.seq,
                    link.at()
                ),
                Some(later) => format!(
                    "record {expected} is out of order: record {} stands before it at {}, and \
                     it at {}",
                    link.seq,
                    link.at(),
                    later.at()
                ),
                None => format!(
                    "record {expected} was removed: {} holds record {} where it belongs",
                    link.at(),
                    link.seq
                ),
            });
        }
        if let Some(before) = i.checked_sub(1).and_then(|b| links.get(b))
            && link.prev != before.hash
        {
            return Some(format!(
                "record {} ({}) was changed: record {} ({}) names another hash for it",
                before.seq,
                before.at(),
                link.seq,
                link.at()
            ));
        }
    }
    None
}

/// The report as text.
pub fn log_text(report: &LogReport) -> String {
    let mut text = String::new();
    match &report.broken {
        None => text.push_str(&format!("intact: {} records", report.records)),
        Some(broken) => text.push_str(&format!("BROKEN: {broken}")),
    }
    text.push('\n');
    if let Some((seq, prev)) = &report.first {
        text.push_str(&format!("first record: {seq}, after {prev}\n"));
    }
    if let Some((seq, hash)) = &report.last {
        text.push_str(&format!("last record: {seq}, hash {hash}\n"));
    }
    text
}

/// The records of `approval` in `files`, in order, one line each: what the person was asked
/// (with the question), how they answered and what came of it. Every value from the file is
/// quoted and escaped, so a record cannot print a line that passes for another.
///
/// # Errors
/// [`AuditError::ReadFile`] when a file cannot be read; [`AuditError::BrokenLog`] when the
/// chain is broken (run `verify-log` to see where): a story is told only from an intact file.
pub fn story(
    files: &[PathBuf],
    approval: &str,
    key: Option<&[u8]>,
) -> Result<Vec<String>, AuditError> {
    let (links, cut) = read_links(files, key)?;
    if let Some(broken) = cut.or_else(|| first_break(&links)) {
        return Err(AuditError::BrokenLog(broken));
    }
    let quoted = |value: Option<&Value>| match value {
        Some(Value::String(text)) => format!("{text:?}"),
        Some(other) => other.to_string(),
        None => "-".to_owned(),
    };
    Ok(links
        .iter()
        .filter(|l| l.record.get("approval_id").and_then(Value::as_str) == Some(approval))
        .map(|l| {
            let field = |key: &str| quoted(l.record.get(key));
            let mut line = format!(
                "{} {} {} by {} via {}",
                field("time"),
                field("outcome"),
                field("tool"),
                field("principal"),
                field("channel"),
            );
            if l.record.get("reason").is_some_and(|r| !r.is_null()) {
                line.push_str(&format!(": {}", field("reason")));
            }
            if let Some(question) = l.record.pointer("/asked/prompt").filter(|q| !q.is_null()) {
                line.push_str(&format!("; asked {}", quoted(Some(question))));
            }
            line
        })
        .collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// A chain of `n` records as the sink writes them.
    fn chain(n: u64) -> Vec<String> {
        let mut prev = "0".repeat(64);
        (1..=n)
            .map(|seq| {
                let line = format!(
                    r#"{{"seq":{seq},"prev":"{prev}","outcome":"applied","approval_id":"a{}"}}"#,
                    seq % 2
                );
                prev = hex::encode(Sha256::digest(line.as_bytes()));
                line
            })
            .collect()
    }

    fn check(lines: &[String], tail: &str) -> LogReport {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        std::fs::write(&path, format!("{}\n{tail}", lines.join("\n"))).unwrap();
        verify_log(&[path]).unwrap()
    }

    #[test]
    fn an_intact_chain_passes_and_reports_its_ends() {
        let lines = chain(5);
        let report = check(&lines, "");
        assert_eq!(report.broken, None);
        assert_eq!(report.records, 5);
        assert_eq!(report.first, Some((1, "0".repeat(64))));
        let last = hex::encode(Sha256::digest(lines[4].as_bytes()));
        assert_eq!(report.last, Some((5, last)));
    }

    #[test]
    fn each_kind_of_tampering_names_the_record() {
        let lines = chain(5);
        let broken = |lines: &[String], tail: &str| check(lines, tail).broken.unwrap();

        let mut changed = lines.clone();
        changed[2] = changed[2].replace("applied", "declined");
        let why = broken(&changed, "");
        assert!(why.starts_with("record 3 (line 3 of"), "{why}");
        assert!(why.contains("was changed"), "{why}");

        let mut removed = lines.clone();
        removed.remove(1);
        assert!(broken(&removed, "").starts_with("record 2 was removed"));

        let mut swapped = lines.clone();
        swapped.swap(1, 2);
        assert!(broken(&swapped, "").starts_with("record 2 is out of order"));

        let mut inserted = lines.clone();
        inserted.insert(3, lines[1].clone());
        let why = broken(&inserted, "");
        assert!(why.starts_with("record 2 at line 4"), "{why}");
        assert!(why.contains("inserted"), "{why}");

        let why = broken(&lines[..4], &lines[4][..20]);
        assert!(why.starts_with("line 5 of"), "{why}");
        assert!(why.contains("cut short"), "{why}");

        let mut garbage = lines.clone();
        garbage[0] = "not json".to_owned();
        assert!(broken(&garbage, "").starts_with("line 1 of"));
    }

    #[test]
    fn a_rotated_pair_is_one_chain_and_out_of_order_files_are_not() {
        let lines = chain(4);
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
        std::fs::write(&a, format!("{}\n", lines[..2].join("\n"))).unwrap();
        std::fs::write(&b, format!("{}\n", lines[2..].join("\n"))).unwrap();
        assert_eq!(verify_log(&[a.clone(), b.clone()]).unwrap().broken, None);
        assert!(verify_log(&[b, a]).unwrap().broken.is_some());
    }

    #[test]
    fn the_story_of_one_approval_is_its_records_in_order() {
        let lines = chain(5);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        std::fs::write(&path, format!("{}\n", lines.join("\n"))).unwrap();
        let told = story(std::slice::from_ref(&path), "a0", None).unwrap();
        assert_eq!(told.len(), 2, "{told:?}");
        assert!(told.iter().all(|l| l.contains("\"applied\"")), "{told:?}");
        // A broken file tells no story.
        let mut broken = lines.clone();
        broken.remove(1);
        std::fs::write(&path, format!("{}\n", broken.join("\n"))).unwrap();
        assert!(matches!(
            story(std::slice::from_ref(&path), "a0", None),
            Err(AuditError::BrokenLog(_))
        ));
    }

    #[test]
    fn a_story_prints_every_value_quoted_so_no_record_passes_for_another_line() {
        let line = format!(
            r#"{{"seq":1,"prev":"{}","time":"t","outcome":"asked\nt applied \u001b[2K","tool":"x","approval_id":"a"}}"#,
            "0".repeat(64)
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        std::fs::write(&path, format!("{line}\n")).unwrap();
        let told = story(&[path], "a", None).unwrap();
        assert_eq!(told.len(), 1);
        assert!(
            !told[0].contains('\n') && !told[0].contains('\u{1b}'),
            "{told:?}"
        );
        assert!(
            told[0].contains(r#""asked\nt applied \u{1b}[2K""#),
            "{told:?}"
        );
    }

    #[test]
    fn a_prev_that_is_not_64_hex_digits_is_not_a_chained_record() {
        let line = r#"{"seq":1,"prev":"\u001b[2Kintact","outcome":"applied"}"#;
        let report = check(&[line.to_owned()], "");
        assert!(report.broken.unwrap().starts_with("line 1 of"));
    }

    #[test]
    fn a_keyed_chain_verifies_only_with_its_key() {
        let key = b"k";
        let mut prev = "0".repeat(64);
        let lines: Vec<String> = (1..=3)
            .map(|seq| {
                let line = format!(r#"{{"seq":{seq},"prev":"{prev}","outcome":"asked"}}"#);
                let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).unwrap();
                mac.update(line.as_bytes());
                prev = hex::encode(mac.finalize().into_bytes());
                line
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        std::fs::write(&path, format!("{}\n", lines.join("\n"))).unwrap();
        let files = std::slice::from_ref(&path);
        assert_eq!(verify_log_keyed(files, Some(key)).unwrap().broken, None);
        assert!(
            verify_log_keyed(files, Some(b"other"))
                .unwrap()
                .broken
                .is_some()
        );
        assert!(verify_log(files).unwrap().broken.is_some());
    }
}
