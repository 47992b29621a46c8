//! Replays every committed fuzz input as an ordinary test: each file of `fuzz/corpus/<target>/`
//! and `fuzz/regressions/<target>/` through `check_<target>`.
//!
//! A target's corpus directory must exist and hold at least one input, so that renaming a
//! target or its directory cannot silently skip it. `regressions/<target>/` is optional (it
//! holds the inputs that once failed, kept whatever `cargo fuzz cmin` does to the corpus).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use mcp_write_guard_fuzz_props::{Check, TARGETS};

/// `fuzz/`, beside this package.
fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("fuzz/props has a parent")
        .to_path_buf()
}

/// The files of `dir`, sorted by name.
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

/// Runs `check` on every file, and names each one that fails.
fn replay(target: &str, check: Check, files: &[PathBuf]) -> Vec<String> {
    let mut failures = Vec::new();
    for file in files {
        let data = fs::read(file).unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        if catch_unwind(AssertUnwindSafe(|| check(&data))).is_err() {
            failures.push(format!("{target}: {}", file.display()));
        }
    }
    failures
}

fn replay_target(name: &str) {
    let (target, check) = TARGETS
        .iter()
        .find(|(target, _)| *target == name)
        .copied()
        .unwrap_or_else(|| panic!("no target named {name}"));
    replay_all(&fuzz_dir(), target, check);
}

/// Replays `<fuzz>/corpus/<target>/` (which must hold inputs) and `<fuzz>/regressions/<target>/`.
fn replay_all(fuzz: &Path, target: &str, check: Check) {
    let corpus = fuzz.join("corpus").join(target);
    assert!(
        corpus.is_dir(),
        "the corpus of {target} is missing: {}",
        corpus.display()
    );
    let mut files = inputs(&corpus);
    assert!(
        !files.is_empty(),
        "the corpus of {target} is empty: {}",
        corpus.display()
    );
    let regressions = fuzz.join("regressions").join(target);
    if regressions.is_dir() {
        files.extend(inputs(&regressions));
    }
    let failures = replay(target, check, &files);
    assert!(
        failures.is_empty(),
        "{} of {} inputs fail:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

#[test]
fn capture() {
    replay_target("capture");
}

#[test]
fn canonical() {
    replay_target("canonical");
}

#[test]
fn envelope() {
    replay_target("envelope");
}

#[test]
fn answer() {
    replay_target("answer");
}

#[test]
fn ids() {
    replay_target("ids");
}

#[test]
fn render() {
    replay_target("render");
}

#[test]
fn tools_list() {
    replay_target("tools_list");
}

/// Every target has a test above, and a fuzz target of the same name.
#[test]
fn every_target_is_replayed_and_fuzzed() {
    let this = include_str!("corpus.rs");
    for (target, _) in TARGETS {
        assert!(
            this.contains(&format!("replay_target(\"{target}\")")),
            "{target} is not replayed"
        );
        let fuzz_target = fuzz_dir().join("fuzz_targets").join(format!("{target}.rs"));
        let source = fs::read_to_string(&fuzz_target)
            .unwrap_or_else(|e| panic!("no fuzz target {}: {e}", fuzz_target.display()));
        assert!(
            source.contains(&format!("mcp_write_guard_fuzz_props::check_{target}(data)")),
            "{} does not call check_{target}",
            fuzz_target.display()
        );
    }
}

/// A missing or empty corpus directory fails the replay, and so does a failing input.
#[test]
fn a_missing_or_empty_corpus_or_a_failing_input_fails() {
    let fuzz = std::env::temp_dir().join(format!("fuzz-props-replay-{}", std::process::id()));
    let corpus = fuzz.join("corpus").join("t");
    let fails = |check: Check| catch_unwind(|| replay_all(&fuzz, "t", check)).is_err();
    assert!(fails(|_| {}), "a missing corpus passed");
    fs::create_dir_all(&corpus).unwrap();
    assert!(fails(|_| {}), "an empty corpus passed");
    fs::write(corpus.join("input"), b"x").unwrap();
    assert!(!fails(|_| {}));
    assert!(
        fails(|_| panic!("a property fails")),
        "a failing input passed"
    );
    let regressions = fuzz.join("regressions").join("t");
    fs::create_dir_all(&regressions).unwrap();
    fs::write(regressions.join("crash"), b"y").unwrap();
    assert!(
        fails(|data| assert_ne!(data, b"y")),
        "a failing regression passed"
    );
    fs::remove_dir_all(&fuzz).unwrap();
}
