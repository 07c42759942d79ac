//! What the unit tests share: the committed Marian fixtures (tests/fixtures/marian).

use std::path::PathBuf;

use serde_json::Value;

/// A fixture file or folder, from the package folder `cargo test` runs in (so checkouts
/// sharing a build cache each test their own files).
pub fn fixture(name: &str) -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
        .join("../../tests/fixtures/marian")
        .join(name)
}

/// A JSON list of token ids.
pub fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}
