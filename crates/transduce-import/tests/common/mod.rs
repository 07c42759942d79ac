//! What the import's integration tests share: the committed Marian fixtures
//! (tests/fixtures/marian) and their import.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::Value;
use transduce::WeightDtype;
use transduce_import::{Imported, ModelFiles, OPTIONAL, Options, REQUIRED, SAFETENSORS, import};

/// A fixture file or folder, from the checkout `cargo test` runs in (so checkouts sharing a
/// build cache each test their own files).
pub fn fixture(name: &str) -> PathBuf {
    transduce_testing::repo_root()
        .join("tests/fixtures/marian")
        .join(name)
}

/// A model folder's files as the import takes them, `weights` its weights file.
pub fn folder_files(dir: &Path, weights: &Path, weights_name: &str) -> ModelFiles {
    let mut files = ModelFiles::new();
    for name in REQUIRED.iter().chain(&OPTIONAL) {
        if let Ok(bytes) = std::fs::read(dir.join(name)) {
            files.insert(*name, bytes);
        }
    }
    files.insert(weights_name, std::fs::read(weights).unwrap());
    files
}

/// A fixture's files, its weights from model.safetensors.
pub fn files(model: &str) -> ModelFiles {
    let dir = fixture(model);
    folder_files(&dir, &dir.join(SAFETENSORS), SAFETENSORS)
}

pub fn options(weights: WeightDtype) -> Options {
    Options {
        weights,
        licence: None,
        name: None,
        folder: None,
        source: Some("en".into()),
        target: Some("de".into()),
        command: "transduce import (test)".into(),
    }
}

/// A fixture imported as en→de.
pub fn imported_files(model: &str, weights: WeightDtype) -> Imported {
    import(files(model), &options(weights)).unwrap()
}

/// A JSON list of token ids.
pub fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}
