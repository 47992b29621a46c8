//! [`JsonLinesSink`]: the audit trail as a tamper-evident JSON-lines file (feature
//! `audit-jsonl`, on by default).

use std::{
    fs::{File, OpenOptions},
    io::{self, Read, Seek, SeekFrom, Write},
    path::Path,
};

use hmac::{Hmac, KeyInit, Mac};
use parking_lot::Mutex;
use serde::Serialize;
use sha2::{Digest as _, Sha256};

use super::{AuditRecord, AuditSink};
use crate::Error;

/// The `prev` of the first record of a chain that continues no earlier file: 64 zeros.
pub const CHAIN_START: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The longest last line [`JsonLinesSink::open`] reads back to continue a file's chain.
const MAX_TAIL_BYTES: u64 = 16 * 1024 * 1024;

/// Appends one JSON object per audit record to a file of its own, chained so that a changed,
/// removed, inserted or reordered record shows.
///
/// Each line is one record, its fields after two of the chain's: `seq`, counting from 1 (or on
/// from the file it continues), and `prev`, the SHA-256 (hex) of the previous line's exact
/// bytes without its line break ([`CHAIN_START`] for the first record of a chain). A file
/// that [continues](Self::open_after) another starts with the next `seq` and the last hash of
/// that file, so rotation keeps the chain. `mcp-audit verify-log FILE...` checks it.
///
/// **When a record is on disk.** Each record is written with one `write` to the file (opened
/// for appending, and locked: one process per file) and then `fdatasync`ed, before
/// [`AuditSink::record`] returns, so before the guard answers the call: a write reported
/// applied has its `applied` record on disk, unless writing or syncing the file failed. A
/// failure is logged (target `mcp_write_guard_rmcp::audit`, level error) and does not change
/// the call's answer: the record comes after the apply it reports. A line that could not be
/// written whole is cut off again. That is synchronous file IO on the request's task (a few
/// hundred microseconds on a local disk, per record; a write has three); for a slow or network
/// file system, implement [`AuditSink`] with a channel to a background writer instead, and say
/// what it guarantees.
///
/// What the chain does not do: it shows a change, removal or insertion between records, but not
/// records removed from the end or the start, nor a whole new chain written by someone who can
/// rewrite the file. Keep the last hash somewhere else (`mcp-audit verify-log` prints it, and
/// the first record's `prev`), ship the file as it grows to a store they cannot write, or
/// [open it with a key](Self::open_keyed): each link is then an HMAC under it.
pub struct JsonLinesSink {
    chain: Mutex<Chain>,
}

impl std::fmt::Debug for JsonLinesSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let chain = self.chain.lock();
        f.debug_struct("JsonLinesSink")
            .field("seq", &chain.seq)
            .field("keyed", &chain.key.is_some())
            .finish_non_exhaustive()
    }
}

struct Chain {
    file: File,
    /// With a key, each link is HMAC-SHA-256 under it instead of SHA-256.
    key: Option<Vec<u8>>,
    /// The `seq` of the last record written (0: none yet).
    seq: u64,
    /// The hash the next record names as `prev`.
    prev: String,
}

/// A record as one line of the file: the chain's fields first.
#[derive(Serialize)]
struct Line<'a> {
    seq: u64,
    prev: &'a str,
    #[serde(flatten)]
    record: &'a AuditRecord,
}

impl JsonLinesSink {
    /// Opens (creating if needed) `path` for appending, continuing the chain of the records
    /// already in it; an empty or new file starts a chain at `seq` 1.
    ///
    /// # Errors
    /// [`Error::AuditFile`] when the file cannot be opened, or its last line is not a whole
    /// chained record (cut short by a crash, or not written by this sink): verify the file and
    /// start a new one with [`Self::open_after`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        Self::open_chain(path.as_ref(), None, None)
    }

    /// Opens `path`, which must be empty or new, to continue the chain of `previous` (the file
    /// it replaces when logs are rotated): its first record has the next `seq` and names the
    /// last hash of `previous`.
    ///
    /// # Errors
    /// [`Error::AuditFile`] when either file cannot be opened, `path` is not empty, or
    /// `previous` holds no chained record or ends in a line that is not one.
    pub fn open_after(path: impl AsRef<Path>, previous: impl AsRef<Path>) -> Result<Self, Error> {
        Self::open_chain(path.as_ref(), Some(previous.as_ref()), None)
    }

    /// [`Self::open`] with a key: each `prev` is the HMAC-SHA-256 of the line before under
    /// `key`, so someone who can rewrite the whole file but does not hold the key cannot write
    /// a chain that verifies (`mcp-audit verify-log --key-file`). Keep the key away from the
    /// file; the same key must open the file again.
    ///
    /// # Errors
    /// As [`Self::open`]; and an empty key.
    pub fn open_keyed(path: impl AsRef<Path>, key: &[u8]) -> Result<Self, Error> {
        Self::open_chain(path.as_ref(), None, Some(key))
    }

    /// [`Self::open_after`] with a key (see [`Self::open_keyed`]).
    ///
    /// # Errors
    /// As [`Self::open_after`]; and an empty key.
    pub fn open_after_keyed(
        path: impl AsRef<Path>,
        previous: impl AsRef<Path>,
        key: &[u8],
    ) -> Result<Self, Error> {
        Self::open_chain(path.as_ref(), Some(previous.as_ref()), Some(key))
    }

    fn open_chain(path: &Path, previous: Option<&Path>, key: Option<&[u8]>) -> Result<Self, Error> {
        let error = |path: &Path| {
            let path = path.to_owned();
            move |source| Error::AuditFile { path, source }
        };
        if key.is_some_and(<[u8]>::is_empty) {
            return Err(error(path)(invalid("the chain's key is empty")));
        }
        let key = key.map(<[u8]>::to_vec);
        let mut file = append(path).map_err(error(path))?;
        let (seq, prev) = match previous {
            None => last_link(&mut file, key.as_deref())
                .map_err(error(path))?
                .unwrap_or_else(|| (0, CHAIN_START.to_owned())),
            Some(previous) => {
                let mut before = File::open(previous).map_err(error(previous))?;
                let link = last_link(&mut before, key.as_deref())
                    .map_err(error(previous))?
                    .ok_or_else(|| invalid("it holds no audit record to continue"))
                    .map_err(error(previous))?;
                if file.metadata().map_err(error(path))?.len() > 0 {
                    return Err(error(path)(invalid(
                        "it is not empty: a continuing file starts a chain",
                    )));
                }
                link
            }
        };
        Ok(Self {
            chain: Mutex::new(Chain {
                file,
                key,
                seq,
                prev,
            }),
        })
    }
}

/// Opens `path` for appending, and locks it: one writer per file, or two processes would
/// write records with the same `seq`.
fn append(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)?;
    file.try_lock().map_err(|error| match error {
        std::fs::TryLockError::WouldBlock => io::Error::new(
            io::ErrorKind::WouldBlock,
            "another writer holds it (one process per audit file)",
        ),
        std::fs::TryLockError::Error(error) => error,
    })?;
    Ok(file)
}

fn invalid(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.to_owned())
}

/// The link to a line (its bytes, without the line break): SHA-256, or HMAC-SHA-256 under
/// `key`, in hex.
fn link_hash(key: Option<&[u8]>, line: &[u8]) -> String {
    match key.and_then(|key| <Hmac<Sha256> as KeyInit>::new_from_slice(key).ok()) {
        Some(mut mac) => {
            mac.update(line);
            hex::encode(mac.finalize().into_bytes())
        }
        None => hex::encode(Sha256::digest(line)),
    }
}

/// The `seq` and hash of the file's last record; `None` for an empty file.
fn last_link(file: &mut File, key: Option<&[u8]>) -> io::Result<Option<(u64, String)>> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(None);
    }
    let start = len.saturating_sub(MAX_TAIL_BYTES);
    file.seek(SeekFrom::Start(start))?;
    let mut tail = Vec::new();
    file.take(MAX_TAIL_BYTES).read_to_end(&mut tail)?;
    let Some(body) = tail.strip_suffix(b"\n") else {
        return Err(invalid("its last line is cut short (no line break)"));
    };
    let line = match body.iter().rposition(|&b| b == b'\n') {
        Some(at) => body.get(at + 1..).unwrap_or_default(),
        None if start == 0 => body,
        None => return Err(invalid("its last line is longer than 16 MiB")),
    };
    let seq = serde_json::from_slice::<serde_json::Value>(line)
        .ok()
        .and_then(|value| value.get("seq").and_then(serde_json::Value::as_u64))
        .ok_or_else(|| invalid("its last line is not a chained audit record"))?;
    Ok(Some((seq, link_hash(key, line))))
}

impl AuditSink for JsonLinesSink {
    fn record(&self, record: &AuditRecord) {
        let mut chain = self.chain.lock();
        let seq = chain.seq.saturating_add(1);
        let line = Line {
            seq,
            prev: &chain.prev,
            record,
        };
        let mut bytes = match serde_json::to_vec(&line) {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::error!(target: "mcp_write_guard_rmcp::audit", %error, "cannot serialise audit record");
                return;
            }
        };
        let hash = link_hash(chain.key.as_deref(), &bytes);
        bytes.push(b'\n');
        let Chain { file, .. } = &mut *chain;
        let before = file.metadata().map(|m| m.len());
        if let Err(error) = file.write_all(&bytes) {
            // A part of the line may be in the file: cut it off, so the next record follows a
            // whole line. If that fails too, the next open refuses the file (its last line is
            // cut short) and verify-log names the line.
            let cut = before.and_then(|len| file.set_len(len));
            tracing::error!(target: "mcp_write_guard_rmcp::audit", %error, seq, cut_back = cut.is_ok(), "cannot write audit record");
            return;
        }
        // The line is in the file: the chain moves on, whatever the sync says.
        chain.seq = seq;
        chain.prev = hash;
        if let Err(error) = chain.file.sync_data() {
            tracing::error!(target: "mcp_write_guard_rmcp::audit", %error, seq, "cannot sync audit record to disk");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::Outcome;
    use crate::audit::tests::record;

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn value(line: &str) -> serde_json::Value {
        serde_json::from_str(line).unwrap()
    }

    #[test]
    fn each_record_is_one_line_naming_the_hash_of_the_one_before() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let sink = JsonLinesSink::open(&path).unwrap();
        sink.record(&record(Outcome::Declined));
        sink.record(&record(Outcome::TokenRejected));
        let lines = lines(&path);
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].starts_with(r#"{"seq":1,"prev":"0000"#),
            "{}",
            lines[0]
        );
        let (first, second) = (value(&lines[0]), value(&lines[1]));
        assert_eq!(first["prev"], CHAIN_START);
        assert_eq!(first["outcome"], "declined");
        assert_eq!(second["seq"], 2);
        assert_eq!(second["prev"], link_hash(None, lines[0].as_bytes()));
        assert_eq!(second["outcome"], "token-rejected");
        assert_eq!(second["tool"], "adjust_stock");
        assert_eq!(second["time"], "1970-01-01T00:00:00Z");
    }

    #[test]
    fn reopening_continues_the_chain_and_a_rotated_file_continues_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let (old, new) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
        JsonLinesSink::open(&old)
            .unwrap()
            .record(&record(Outcome::Asked));
        JsonLinesSink::open(&old)
            .unwrap()
            .record(&record(Outcome::Approved));
        let kept = lines(&old);
        assert_eq!(value(&kept[1])["seq"], 2);
        assert_eq!(value(&kept[1])["prev"], link_hash(None, kept[0].as_bytes()));

        JsonLinesSink::open_after(&new, &old)
            .unwrap()
            .record(&record(Outcome::Applied));
        let next = lines(&new);
        assert_eq!(value(&next[0])["seq"], 3);
        assert_eq!(value(&next[0])["prev"], link_hash(None, kept[1].as_bytes()));
        // A continuing file must be new: it cannot restart a chain in the middle of another.
        assert!(JsonLinesSink::open_after(&new, &old).is_err());
        // Nor can an empty file be continued.
        let empty = dir.path().join("empty.jsonl");
        std::fs::write(&empty, "").unwrap();
        assert!(JsonLinesSink::open_after(dir.path().join("c.jsonl"), &empty).is_err());
    }

    #[test]
    fn a_file_whose_last_line_is_not_a_whole_chained_record_is_not_continued() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        for content in [
            "{\"seq\":1,\"prev\":\"00\"}\n{\"seq\":2,\"pr",
            "{\"outcome\":\"applied\"}\n",
            "not json\n",
        ] {
            std::fs::write(&path, content).unwrap();
            let opened = JsonLinesSink::open(&path);
            assert!(
                matches!(opened, Err(Error::AuditFile { .. })),
                "{content:?}"
            );
            assert_eq!(std::fs::read_to_string(&path).unwrap(), content);
        }
    }

    #[test]
    fn one_writer_per_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let first = JsonLinesSink::open(&path).unwrap();
        let second = JsonLinesSink::open(&path);
        assert!(
            matches!(&second, Err(Error::AuditFile { source, .. }) if source.kind() == io::ErrorKind::WouldBlock),
            "{second:?}"
        );
        drop(first);
        assert!(JsonLinesSink::open(&path).is_ok());
    }

    #[test]
    fn a_keyed_chain_links_by_hmac_and_only_the_same_key_continues_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let key = b"kept away from the file";
        let sink = JsonLinesSink::open_keyed(&path, key).unwrap();
        sink.record(&record(Outcome::Asked));
        sink.record(&record(Outcome::Declined));
        drop(sink);
        let kept = lines(&path);
        let second = value(&kept[1]);
        assert_eq!(second["prev"], link_hash(Some(key), kept[0].as_bytes()));
        assert_ne!(second["prev"], link_hash(None, kept[0].as_bytes()));
        JsonLinesSink::open_keyed(&path, key)
            .unwrap()
            .record(&record(Outcome::Asked));
        let third = value(&lines(&path)[2]);
        assert_eq!(third["prev"], link_hash(Some(key), kept[1].as_bytes()));
        assert!(JsonLinesSink::open_keyed(&path, b"").is_err());
    }
}
