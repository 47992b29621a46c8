//! [`JsonLinesSink`]: the audit trail as a JSON-lines file (feature `audit-jsonl`, on by default).

use std::{
    fs::{File, OpenOptions},
    io::{BufWriter, Write},
    path::Path,
};

use parking_lot::Mutex;

use super::{AuditRecord, AuditSink};
use crate::Error;

/// Appends one JSON object per decision to a file (JSON lines), flushing after each record.
///
/// The write and the flush happen synchronously, on the request's task, under a lock: every
/// write call waits for the file system (and for other calls recording at the same moment).
/// That is fine for a local disk and a modest rate of writes. For a slow or network file
/// system, or many writes per second, implement [`AuditSink`] with a channel to a background
/// writer instead.
#[derive(Debug)]
pub struct JsonLinesSink {
    file: Mutex<BufWriter<File>>,
}

impl JsonLinesSink {
    /// Opens (creating if needed) `path` for appending.
    ///
    /// # Errors
    /// [`Error::AuditFile`] when the file cannot be opened for appending.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| Error::AuditFile {
                path: path.to_owned(),
                source,
            })?;
        Ok(Self {
            file: Mutex::new(BufWriter::new(file)),
        })
    }
}

impl AuditSink for JsonLinesSink {
    fn record(&self, record: &AuditRecord) {
        let line = match serde_json::to_string(record) {
            Ok(line) => line,
            Err(error) => {
                tracing::error!(target: "mcp_write_guard_rmcp::audit", %error, "cannot serialise audit record");
                return;
            }
        };
        let mut file = self.file.lock();
        let written = writeln!(file, "{line}").and_then(|()| file.flush());
        if let Err(error) = written {
            tracing::error!(target: "mcp_write_guard_rmcp::audit", %error, "cannot write audit record");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::Outcome;
    use crate::audit::tests::record;

    #[test]
    fn json_lines_sink_appends_one_object_per_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let sink = JsonLinesSink::open(&path).unwrap();
        sink.record(&record(Outcome::Declined));
        sink.record(&record(Outcome::TokenRejected));
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["outcome"], "declined");
        assert_eq!(lines[1]["outcome"], "token-rejected");
        assert_eq!(lines[1]["tool"], "adjust_stock");
        assert_eq!(lines[1]["time"], "1970-01-01T00:00:00Z");
    }
}
