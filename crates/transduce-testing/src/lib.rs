//! # transduce-testing
//!
//! A test that cannot run here (no GPU adapter, no f16, a corpus or a tool missing) calls
//! [`skip`] and returns. libtest has no skipped state of its own, and cargo hides a passing
//! test's output, so a plain `println!` and `return` counted as a pass and its reason was
//! never seen. [`skip`] says why on stderr and, where the test command asks for it
//! (`TRANSDUCE_SKIP_LOG`, set by scripts/test.sh), appends a line to that file: the command
//! then counts the test as skipped, not passed, and prints each reason once.
//!
//! Tests find the checkout's files from [`repo_root`], and the shared corpora beside the
//! checkout from [`shared_data`].

use std::fmt::Display;
use std::io::Write;
use std::path::PathBuf;

/// The variable naming the file skips are recorded in.
pub const SKIP_LOG: &str = "TRANSDUCE_SKIP_LOG";

/// Records that the running test skips itself (it returns next) and why.
pub fn skip(reason: impl Display) {
    record("skip", reason);
}

/// Records that the running test skips one of its cases (it goes on with the others), and
/// why: the test still passes or fails on the rest, and the command lists the case apart.
pub fn skip_part(reason: impl Display) {
    record("part", reason);
}

/// The workspace root (recipes/, scripts/, web/models/, tests/fixtures/), canonical where it
/// can be. It is two folders above the package `cargo test` runs, as that package's
/// `CARGO_MANIFEST_DIR` gives it at run time (every member is `crates/NAME`), so that a
/// build cache shared by two checkouts tests the files of the one it runs in; above this
/// crate's compile-time folder otherwise.
pub fn repo_root() -> PathBuf {
    let root = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
        .join("../..");
    root.canonicalize().unwrap_or(root)
}

/// The shared corpora, `../shared/data` beside the checkout (it may be absent: a test that
/// needs it skips).
pub fn shared_data() -> PathBuf {
    repo_root().join("../shared/data")
}

fn record(kind: &str, reason: impl Display) {
    let test = std::thread::current()
        .name()
        .unwrap_or("(unnamed)")
        .to_string();
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|s| {
            s.rsplit_once('-')
                .map_or(s.clone(), |(name, _)| name.to_string())
        })
        .unwrap_or_default();
    let reason = reason.to_string().replace(['\n', '\t'], " ");
    eprintln!("SKIP: {binary} {test}: {reason}");
    if let Some(path) = std::env::var_os(SKIP_LOG) {
        // One write per line, appended: concurrent tests' lines do not interleave.
        let line = format!("{kind}\t{binary}\t{test}\t{reason}\n");
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = file.write_all(line.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_recorded_with_the_tests_name() {
        let dir = std::env::temp_dir().join(format!("transduce-skip-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("skips");
        // Only this test sets the variable in this binary.
        unsafe { std::env::set_var(SKIP_LOG, &log) };
        skip("no adapter\there");
        let text = std::fs::read_to_string(&log).unwrap();
        let fields: Vec<&str> = text.trim_end().split('\t').collect();
        assert_eq!(fields.len(), 4, "{text:?}");
        assert_eq!(fields[0], "skip");
        assert!(fields[1].starts_with("transduce_testing"), "{text:?}");
        assert_eq!(fields[2], "tests::a_skip_is_recorded_with_the_tests_name");
        assert_eq!(fields[3], "no adapter here");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_repo_root_is_the_workspace() {
        let root = repo_root();
        assert!(
            root.join("crates/transduce-testing/Cargo.toml").is_file(),
            "{root:?}"
        );
        assert!(root.join("Cargo.lock").is_file(), "{root:?}");
        assert_eq!(shared_data(), root.join("../shared/data"));
    }
}
