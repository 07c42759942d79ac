//! `transduce warmup` and the GPU cache: a second process tunes nothing.

use crate::harness::*;

/// The count of cubecl autotunes a `warmup` reports ("tunes N").
fn tunes_reported(out: &str) -> u64 {
    let at = out
        .find("tunes ")
        .unwrap_or_else(|| panic!("no tune count: {out}"));
    out[at + 6..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no tune count: {out}"))
}

/// The GPU cache keeps autotune decisions between processes: `warmup` into a fresh
/// `TRANSDUCE_CACHE_DIR` tunes every kernel of its two shape classes, and the same
/// command in a new process tunes none (counts, not times), from a folder named by the
/// device and the build. Runs on lavapipe in CI; skips where wgpu finds no adapter.
#[test]
fn a_second_gpu_process_skips_every_tune() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let warmup = || {
        bin()
            .env("TRANSDUCE_CACHE_DIR", &cache)
            .env_remove("CUBECL_AUTOTUNE_CACHE")
            .args([
                "warmup",
                "--preset",
                "tiny",
                "--backend",
                "wgpu",
                "--vocab",
                "64",
                "--max-tokens",
                "64",
                "--max-length",
                "6",
            ])
            .output()
            .unwrap()
    };
    let first = warmup();
    let stderr = String::from_utf8_lossy(&first.stderr).to_string();
    if stderr.contains("no usable GPU adapter") {
        transduce_testing::skip(format_args!(
            "a_second_gpu_process_skips_every_tune: {stderr}"
        ));
        return;
    }
    assert!(first.status.success(), "{stderr}");
    let first = String::from_utf8_lossy(&first.stdout).to_string() + &stderr;
    assert!(first.contains("warmup: 2 shapes"), "{first}");
    let tuned = tunes_reported(&first);
    assert!(tuned > 0, "a fresh cache should tune: {first}");
    let device_dirs: Vec<_> = std::fs::read_dir(cache.join("gpu"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        device_dirs.len() == 1 && device_dirs[0].starts_with("wgpu-"),
        "{device_dirs:?}"
    );
    let second = warmup();
    let out = String::from_utf8_lossy(&second.stdout).to_string()
        + &String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{out}");
    assert_eq!(tunes_reported(&out), 0, "first run tuned {tuned}: {out}");
}
