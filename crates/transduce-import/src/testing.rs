//! What the unit tests share: the committed Marian fixtures (tests/fixtures/marian).

use std::path::PathBuf;

use serde_json::Value;

/// A fixture file or folder, from the checkout `cargo test` runs in (so checkouts sharing a
/// build cache each test their own files).
pub fn fixture(name: &str) -> PathBuf {
    transduce_testing::repo_root()
        .join("tests/fixtures/marian")
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
