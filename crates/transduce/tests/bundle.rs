//! The bundle format: exact round trips, and one clear error for each kind of bad bundle.

mod common;

use std::collections::HashMap;

use common::*;
use transduce::bundle::{BundleFiles, WeightDtype, load_weights, save_weights};
use transduce::{Bundle, BundleConfig, Error, ModelConfig, Tokenizer, Transformer};

fn tokenizer() -> Tokenizer {
    let text = [
        "a small dog runs",
        "ein kleiner Hund rennt",
        "two men play",
        "zwei Männer spielen",
    ];
    Tokenizer::train(text.iter(), 60).unwrap()
}

fn bundle(config: ModelConfig) -> Bundle {
    let device = device();
    device.seed(7);
    let model = Transformer::new(&config.with_vocab(60), &device).unwrap();
    translation_bundle(tokenizer(), model)
}

fn logits(model: &Transformer) -> Vec<f32> {
    let device = device();
    values(model.forward(ids(&[&[5, 9, 12]], &device), ids(&[&[1, 8, 14]], &device)))
}

#[test]
fn round_trip_is_exact() {
    for config in [
        ModelConfig::tiny(),
        ModelConfig {
            share_embeddings: false,
            positional: transduce::Positional::Learned,
            ..ModelConfig::tiny()
        },
    ] {
        let original = bundle(config);
        let files = original.to_bytes(WeightDtype::F32).unwrap();
        let loaded = Bundle::from_bytes(&files, &device()).unwrap();
        assert_eq!(loaded.config.model, *original.model.config());
        assert_eq!(logits(&loaded.model), logits(&original.model));
        // Saving again gives the same bytes.
        assert_eq!(
            loaded.to_bytes(WeightDtype::F32).unwrap().weights,
            files.weights
        );
    }
}

#[test]
fn tensor_names_are_readable_and_linear_weights_are_out_by_in() {
    let b = bundle(ModelConfig::tiny());
    let bytes = save_weights(&b.model, WeightDtype::F32).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let shapes: HashMap<String, Vec<usize>> = file
        .tensors()
        .into_iter()
        .map(|(n, v)| (n, v.shape().to_vec()))
        .collect();
    let h_dk = 4 * 16;
    assert_eq!(
        shapes["encoder.layers.0.self_attn.q.weight"],
        vec![h_dk, 64]
    );
    assert_eq!(
        shapes["decoder.layers.1.cross_attn.o.weight"],
        vec![64, h_dk]
    );
    assert_eq!(shapes["decoder.layers.1.ffn.fc1.weight"], vec![256, 64]);
    assert_eq!(shapes["decoder.layers.1.ffn.fc1.bias"], vec![256]);
    assert_eq!(shapes["encoder.layers.1.ffn_norm.weight"], vec![64]);
    assert_eq!(shapes["embedding.weight"], vec![60, 64]);
    assert!(!shapes.contains_key("encoder.layers.0.self_attn.q.bias"));
}

#[test]
fn f16_halves_the_size_and_stays_close() {
    let b = bundle(ModelConfig::tiny());
    let f32_files = b.to_bytes(WeightDtype::F32).unwrap();
    let f16_files = b.to_bytes(WeightDtype::F16).unwrap();
    let ratio = f16_files.weights.len() as f64 / f32_files.weights.len() as f64;
    assert!(ratio < 0.52, "{ratio}");
    let loaded = Bundle::from_bytes(&f16_files, &device()).unwrap();
    assert!(max_abs_diff(&logits(&loaded.model), &logits(&b.model)) < 0.05);
}

fn err(files: &BundleFiles) -> Error {
    match Bundle::from_bytes(files, &device()) {
        Ok(_) => panic!("bad bundle loaded"),
        Err(e) => e,
    }
}

#[test]
fn truncated_and_corrupt_weights() {
    let files = unchecked(
        bundle(ModelConfig::tiny())
            .to_bytes(WeightDtype::F32)
            .unwrap(),
    );
    let mut truncated = files.clone();
    truncated.weights.truncate(files.weights.len() / 2);
    assert!(
        matches!(err(&truncated), Error::CorruptWeights(_)),
        "{}",
        err(&truncated)
    );
    let mut garbage = files.clone();
    garbage.weights = b"this is not a safetensors file at all".to_vec();
    assert!(matches!(err(&garbage), Error::CorruptWeights(_)));
    let mut empty = files;
    empty.weights.clear();
    assert!(matches!(err(&empty), Error::CorruptWeights(_)));
}

#[test]
fn checksums_catch_any_changed_byte() {
    let mut files = bundle(ModelConfig::tiny())
        .to_bytes(WeightDtype::F32)
        .unwrap();
    let last = files.weights.len() - 1;
    files.weights[last] ^= 1;
    let e = err(&files);
    assert!(matches!(e, Error::Checksum { .. }), "{e}");
    assert!(e.to_string().contains("model.safetensors"));
}

fn rewrite(files: &BundleFiles, keep: impl Fn(&str) -> bool, reshape: Option<&str>) -> Vec<u8> {
    let file = safetensors::SafeTensors::deserialize(&files.weights).unwrap();
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, view) in file.tensors() {
        if !keep(&name) {
            continue;
        }
        let mut shape = view.shape().to_vec();
        let mut data = view.data().to_vec();
        if reshape == Some(name.as_str()) {
            // Drop the last row: a shape the config does not imply.
            let row: usize = shape[1..].iter().product::<usize>() * 4;
            shape[0] -= 1;
            data.truncate(data.len() - row);
        }
        tensors.push((name, shape, data));
    }
    let views: Vec<(String, safetensors::tensor::TensorView)> = tensors
        .iter()
        .map(|(n, s, d)| {
            (
                n.clone(),
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), d)
                    .unwrap(),
            )
        })
        .collect();
    safetensors::serialize(views, None).unwrap()
}

#[test]
fn missing_tensor_is_named() {
    let files = unchecked(
        bundle(ModelConfig::tiny())
            .to_bytes(WeightDtype::F32)
            .unwrap(),
    );
    let mut missing = files.clone();
    missing.weights = rewrite(&files, |n| n != "decoder.layers.1.ffn.fc2.bias", None);
    let e = err(&missing);
    assert!(
        e.to_string().contains("decoder.layers.1.ffn.fc2.bias"),
        "{e}"
    );
    assert!(matches!(e, Error::MissingTensor(_)));
}

#[test]
fn wrong_shape_is_named() {
    let files = unchecked(
        bundle(ModelConfig::tiny())
            .to_bytes(WeightDtype::F32)
            .unwrap(),
    );
    let mut wrong = files.clone();
    wrong.weights = rewrite(&files, |_| true, Some("encoder.layers.0.ffn.fc1.weight"));
    let e = err(&wrong);
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    assert!(e.to_string().contains("encoder.layers.0.ffn.fc1.weight"));
}

#[test]
fn config_that_does_not_match_the_weights() {
    let b = bundle(ModelConfig::tiny());
    let weights = save_weights(&b.model, WeightDtype::F32).unwrap();
    let device = device();
    // More layers than the weights hold: a missing tensor.
    let deeper = ModelConfig {
        n_layers: 3,
        ..b.model.config().clone()
    };
    assert!(matches!(
        load_weights(&deeper, &weights, &device),
        Err(Error::MissingTensor(_))
    ));
    // Fewer layers: tensors left over.
    let shallower = ModelConfig {
        n_layers: 1,
        ..b.model.config().clone()
    };
    let e = load_weights(&shallower, &weights, &device).err().unwrap();
    assert!(matches!(e, Error::UnexpectedTensors(_)), "{e}");
    // Another width: a shape mismatch.
    let wider = ModelConfig {
        d_ff: 128,
        ..b.model.config().clone()
    };
    assert!(matches!(
        load_weights(&wider, &weights, &device),
        Err(Error::ShapeMismatch { .. })
    ));
}

#[test]
fn bad_config_json_names_line_and_field() {
    let files = bundle(ModelConfig::tiny())
        .to_bytes(WeightDtype::F32)
        .unwrap();
    let mut syntax = files.clone();
    syntax.config = b"{\n  \"format\": 1,\n  \"task\": oops\n}".to_vec();
    let e = err(&syntax).to_string();
    assert!(e.contains("config.json, line 3"), "{e}");

    let mut field = files.clone();
    let text = String::from_utf8(files.config.clone()).unwrap();
    field.config = text
        .replace("\"n_heads\": 4", "\"n_heads\": 0")
        .into_bytes();
    let e = err(&field).to_string();
    assert!(e.contains("n_heads"), "{e}");

    let mut unknown = files.clone();
    unknown.config = text
        .replace("\"n_heads\": 4", "\"n_headz\": 4")
        .into_bytes();
    let e = err(&unknown).to_string();
    assert!(e.contains("n_headz"), "{e}");

    let mut tok = files;
    tok.tokenizer = b"{}".to_vec();
    let mut config = BundleConfig::from_json(&tok.config).unwrap();
    config.sha256.clear();
    tok.config = config.to_json().into_bytes();
    assert!(err(&tok).to_string().starts_with("tokenizer.json"));
}

/// A config.json that lies: sizes far beyond what the weights hold, sizes whose parameter
/// count overflows, decoding defaults out of range. Each is one error, before the model is
/// allocated (in the browser, running out of memory would kill the module).
#[test]
fn lying_configs_are_refused_before_allocation() {
    let files = unchecked(
        bundle(ModelConfig::tiny())
            .to_bytes(WeightDtype::F16)
            .unwrap(),
    );
    let edit = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut config: serde_json::Value = serde_json::from_slice(&files.config).unwrap();
        f(&mut config);
        BundleFiles {
            config: serde_json::to_vec(&config).unwrap(),
            ..files.clone()
        }
    };
    // 2^20 × 2^20 embeddings: 4 TB as f32. Refused by counting, not by allocating.
    let huge = edit(&|c| {
        c["model"]["d_model"] = 1_048_576.into();
        c["model"]["vocab_size"] = 1_048_576.into();
    });
    let e = err(&huge).to_string();
    assert!(e.contains("far more than"), "{e}");
    let overflow = edit(&|c| c["model"]["n_layers"] = u64::MAX.into());
    let e = err(&overflow).to_string();
    assert!(e.contains("d_model"), "{e}");
    for (field, value) in [
        ("beam", serde_json::Value::from(0)),
        ("beam", 1_000_000_000.into()),
        ("alpha", (-1.0).into()),
    ] {
        let bad = edit(&|c| c["decoding"][field] = value.clone());
        let e = err(&bad).to_string();
        assert!(e.contains(&format!("decoding.{field}")), "{field}: {e}");
    }
}
