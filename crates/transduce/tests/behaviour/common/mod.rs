//! Helpers shared by the integration tests: small random models on the CPU backend.
#![allow(dead_code)]

use transduce::bundle::{BundleFiles, Provenance, Task};
use transduce::burn::prelude::*;
use transduce::burn::tensor::TensorData;
use transduce::decode::DecodeOptions;
use transduce::{Bundle, BundleConfig, ModelConfig, Tokenizer, Transformer};

pub fn device() -> Device {
    Device::flex()
}

/// A tiny untrained model with the given vocabulary, seeded.
pub fn tiny_model(vocab: usize, seed: u64) -> Transformer {
    let device = device();
    device.seed(seed);
    Transformer::new(&ModelConfig::tiny().with_vocab(vocab), &device).unwrap()
}

pub fn ids(rows: &[&[u32]], device: &Device) -> Tensor<2, Int> {
    let t = rows[0].len();
    let data: Vec<i32> = rows
        .iter()
        .flat_map(|r| r.iter().map(|&v| v as i32))
        .collect();
    Tensor::from_data(TensorData::new(data, [rows.len(), t]), device)
}

pub fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_into_vec_as::<f32>().unwrap()
}

pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Deterministic pseudo-random token ids in `lo..hi` (splitmix64).
pub fn random_ids(seed: u64, len: usize, lo: u32, hi: u32) -> Vec<u32> {
    let mut state = seed;
    (0..len)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            lo + (z % (hi - lo) as u64) as u32
        })
        .collect()
}

/// An en→de translation bundle of a model in memory, with §6.1's decoding defaults.
pub fn translation_bundle(tokenizer: Tokenizer, model: Transformer) -> Bundle {
    Bundle::new(
        BundleConfig {
            format: transduce::bundle::BUNDLE_FORMAT,
            task: Task::Translate {
                source: "en".into(),
                target: "de".into(),
            },
            model: model.config().clone(),
            decoding: DecodeOptions::default(),
            provenance: Provenance::default(),
            weights: None,
            metrics: Default::default(),
            sha256: Default::default(),
            channel: None,
            adaptation: None,
        },
        tokenizer,
        model,
    )
    .unwrap()
}

/// A bundle's files with the checksums dropped from config.json, so damaged weights reach
/// the weight reader.
pub fn unchecked(mut files: BundleFiles) -> BundleFiles {
    let mut config = BundleConfig::from_json(&files.config).unwrap();
    config.sha256.clear();
    files.config = config.to_json().into_bytes();
    files
}
