//! What the workspace's bench binaries (`approved-writes`, `load`) share: their options' numbers,
//! where the server binary is, what its log said last.

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
};

/// A command line's `--flag value` pairs, in order, read one at a time: `Err(usage)` for
/// `--help` or `-h`, and an error naming a flag that has no value after it. A bench's `parse`
/// matches each flag and stops at the first error.
pub fn flag_values<'a>(
    args: impl IntoIterator<Item = OsString> + 'a,
    usage: &'a str,
) -> impl Iterator<Item = Result<(String, OsString), String>> + 'a {
    let mut args = args.into_iter();
    std::iter::from_fn(move || {
        let flag = args.next()?.to_string_lossy().into_owned();
        if flag == "--help" || flag == "-h" {
            return Some(Err(usage.to_owned()));
        }
        Some(match args.next() {
            Some(value) => Ok((flag, value)),
            None => Err(format!("{flag} needs a value\n{usage}")),
        })
    })
}

/// `list` as a command line's arguments (without the program name), for tests of a `parse`.
pub fn os_args(list: &[&str]) -> Vec<OsString> {
    list.iter().map(OsString::from).collect()
}

/// `value` of option `flag` as a whole number of at least `least`.
pub fn parse_count(flag: &str, value: &str, least: u32) -> Result<u32, String> {
    match value.parse::<u32>() {
        Ok(n) if n >= least => Ok(n),
        _ => Err(format!(
            "{flag} takes a whole number of at least {least}, not {value:?}"
        )),
    }
}

/// `store-server` in the directory of the running executable (cargo builds both into one).
pub fn default_server() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let dir = exe
        .parent()
        .ok_or_else(|| format!("{} has no directory", exe.display()))?;
    Ok(dir.join(format!("store-server{}", std::env::consts::EXE_SUFFIX)))
}

/// The last 20 lines of the log at `path` (nothing if it cannot be read).
pub fn log_tail(path: &Path) -> String {
    let log = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines
        .get(lines.len().saturating_sub(20)..)
        .unwrap_or_default()
        .join("\n")
}

/// A bench's options from its command line, or the exit code after saying why not: `parse`
/// failed (usage, 2), or there is no server binary at `server(&options)` (2). Notes a debug
/// build on stderr.
pub fn options_or_exit<T>(
    parse: impl FnOnce(std::env::ArgsOs) -> Result<T, String>,
    server: impl FnOnce(&T) -> &Path,
) -> Result<T, std::process::ExitCode> {
    let args = {
        let mut args = std::env::args_os();
        args.next();
        args
    };
    let options = parse(args).map_err(|e| {
        eprintln!("{e}");
        std::process::ExitCode::from(2)
    })?;
    let path = server(&options);
    if !path.is_file() {
        eprintln!(
            "no server at {}: build it first (cargo build --release -p store-server) or pass \
             --server PATH",
            path.display()
        );
        return Err(std::process::ExitCode::from(2));
    }
    if cfg!(debug_assertions) {
        eprintln!("note: this is a debug build; use a release build for figures");
    }
    Ok(options)
}
