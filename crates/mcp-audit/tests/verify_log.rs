//! `mcp-audit verify-log` and `story` as a user runs them: exit 0 for an intact chain, 1 naming
//! the first broken record, 2 when a file cannot be read.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    missing_docs
)]

use std::process::Command;

use sha2::{Digest as _, Sha256};

/// Three chained records, as the guard's `JsonLinesSink` writes them.
fn chain() -> Vec<String> {
    let mut prev = "0".repeat(64);
    (1..=3)
        .map(|seq| {
            let line = format!(
                r#"{{"seq":{seq},"prev":"{prev}","time":"2026-12-02T10:00:0{seq}Z","principal":"local","tool":"adjust_stock","outcome":"{}","approval_id":"ab12"}}"#,
                ["asked", "approved", "applied"][seq - 1]
            );
            prev = hex::encode(Sha256::digest(line.as_bytes()));
            line
        })
        .collect()
}

fn mcp_audit(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-audit"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn verify_log_exits_0_1_or_2_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let lines = chain();
    std::fs::write(&path, format!("{}\n", lines.join("\n"))).unwrap();
    let file = path.to_str().unwrap();

    let (code, stdout, _) = mcp_audit(&["verify-log", file]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.starts_with("intact: 3 records\n"), "{stdout}");
    let last = hex::encode(Sha256::digest(lines[2].as_bytes()));
    assert!(
        stdout.contains(&format!("last record: 3, hash {last}")),
        "{stdout}"
    );

    let (code, stdout, _) = mcp_audit(&["story", "ab12", file]);
    assert_eq!(code, 0);
    assert_eq!(stdout.lines().count(), 3, "{stdout}");
    assert!(
        stdout
            .lines()
            .next()
            .unwrap()
            .contains(r#""asked" "adjust_stock" by "local""#),
        "{stdout}"
    );

    std::fs::write(&path, format!("{}\n{}\n", lines[0], lines[2])).unwrap();
    let (code, stdout, _) = mcp_audit(&["verify-log", file]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.starts_with("BROKEN: record 2 was removed"),
        "{stdout}"
    );

    // No story from a broken file.
    let (code, stdout, stderr) = mcp_audit(&["story", "ab12", file]);
    assert_eq!((code, stdout.as_str()), (2, ""), "{stderr}");
    assert!(stderr.contains("chain is broken"), "{stderr}");

    let (code, _, stderr) = mcp_audit(&["verify-log", dir.path().join("none").to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("could not read"), "{stderr}");
}

#[test]
fn a_keyed_chain_needs_its_key_file() {
    use hmac::{Hmac, KeyInit, Mac};
    let dir = tempfile::tempdir().unwrap();
    let (path, key_path) = (dir.path().join("audit.jsonl"), dir.path().join("key"));
    std::fs::write(&key_path, b"secret").unwrap();
    let mut prev = "0".repeat(64);
    let mut text = String::new();
    for seq in 1..=2 {
        let line = format!(r#"{{"seq":{seq},"prev":"{prev}","outcome":"asked"}}"#);
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(b"secret").unwrap();
        mac.update(line.as_bytes());
        prev = hex::encode(mac.finalize().into_bytes());
        text.push_str(&line);
        text.push('\n');
    }
    std::fs::write(&path, text).unwrap();
    let (file, key) = (path.to_str().unwrap(), key_path.to_str().unwrap());
    let (code, stdout, _) = mcp_audit(&["verify-log", "--key-file", key, file]);
    assert_eq!(code, 0, "{stdout}");
    let (code, stdout, _) = mcp_audit(&["verify-log", file]);
    assert_eq!(code, 1, "{stdout}");
}
