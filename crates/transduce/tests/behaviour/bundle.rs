//! The bundle format: exact round trips, and one clear error for each kind of bad bundle.

use std::collections::HashMap;

use crate::common::*;
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
        assert_eq!(loaded.config.model, *original.model().unwrap().config());
        assert_eq!(
            logits(loaded.model().unwrap()),
            logits(original.model().unwrap())
        );
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
    let bytes = save_weights(b.model().unwrap(), WeightDtype::F32).unwrap();
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
    assert!(
        max_abs_diff(
            &logits(loaded.model().unwrap()),
            &logits(b.model().unwrap())
        ) < 0.05
    );
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
    let weights = save_weights(b.model().unwrap(), WeightDtype::F32).unwrap();
    let device = device();
    // More layers than the weights hold: a missing tensor.
    let deeper = ModelConfig {
        n_layers: 3,
        ..b.model().unwrap().config().clone()
    };
    assert!(matches!(
        load_weights(&deeper, &weights, &device),
        Err(Error::MissingTensor(_))
    ));
    // Fewer layers: tensors left over.
    let shallower = ModelConfig {
        n_layers: 1,
        ..b.model().unwrap().config().clone()
    };
    let e = load_weights(&shallower, &weights, &device).err().unwrap();
    assert!(matches!(e, Error::UnexpectedTensors(_)), "{e}");
    // Another width: a shape mismatch.
    let wider = ModelConfig {
        d_ff: 128,
        ..b.model().unwrap().config().clone()
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
    // The same of an int8 bundle, which the CPU reads without burn's model.
    let int8 = unchecked(
        bundle(ModelConfig::tiny())
            .to_bytes(WeightDtype::Int8)
            .unwrap(),
    );
    let mut config: serde_json::Value = serde_json::from_slice(&int8.config).unwrap();
    config["model"]["d_model"] = 1_048_576.into();
    config["model"]["vocab_size"] = 1_048_576.into();
    let huge_int8 = BundleFiles {
        config: serde_json::to_vec(&config).unwrap(),
        ..int8
    };
    let e = err(&huge_int8).to_string();
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
    // The noisy-channel weight: a number ≥ 0, and only the two known fields.
    let bad = edit(&|c| c["channel"] = serde_json::json!({"model": "de-en", "weight": -0.5}));
    let e = err(&bad).to_string();
    assert!(e.contains("channel.weight"), "{e}");
    let bad = edit(&|c| c["channel"] = serde_json::json!({"model": "de-en", "wieght": 0.3}));
    let e = err(&bad).to_string();
    assert!(e.contains("wieght"), "{e}");
    let good = edit(&|c| c["channel"] = serde_json::json!({"model": "de-en", "weight": 0.3}));
    let config = transduce::BundleConfig::from_json(&good.config).unwrap();
    assert_eq!(config.channel.unwrap().weight, 0.3);
}

/// An int8 bundle's file with one tensor replaced: `edit(name, dtype, shape, bytes)` may
/// change any of them (or drop the tensor by returning `None`).
fn edit_int8(
    files: &BundleFiles,
    edit: impl Fn(
        &str,
        safetensors::Dtype,
        Vec<usize>,
        Vec<u8>,
    ) -> Option<(safetensors::Dtype, Vec<usize>, Vec<u8>)>,
) -> BundleFiles {
    let file = safetensors::SafeTensors::deserialize(&files.weights).unwrap();
    let tensors: Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)> = file
        .tensors()
        .into_iter()
        .filter_map(|(name, view)| {
            edit(
                &name,
                view.dtype(),
                view.shape().to_vec(),
                view.data().to_vec(),
            )
            .map(|(dtype, shape, data)| (name, dtype, shape, data))
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView)> = tensors
        .iter()
        .map(|(n, dtype, s, d)| {
            (
                n.clone(),
                safetensors::tensor::TensorView::new(*dtype, s.clone(), d).unwrap(),
            )
        })
        .collect();
    BundleFiles {
        weights: safetensors::serialize(views, None).unwrap(),
        ..files.clone()
    }
}

/// int8 storage: matrices as I8 with a scale per row, the rest f32; about a quarter of
/// f32's size; loaded weights within half a step of the originals; the CPU decoder then
/// multiplies in int8; and saving the loaded bundle again gives back the same integers.
#[test]
fn int8_quarters_the_matrices_and_round_trips() {
    let b = bundle(ModelConfig::tiny());
    let f32_files = b.to_bytes(WeightDtype::F32).unwrap();
    let files = b.to_bytes(WeightDtype::Int8).unwrap();
    let ratio = files.weights.len() as f64 / f32_files.weights.len() as f64;
    assert!(ratio < 0.3, "{ratio}");
    assert!(String::from_utf8_lossy(&files.config).contains("\"weights\": \"int8\""));
    let file = safetensors::SafeTensors::deserialize(&files.weights).unwrap();
    let dtype = |n: &str| file.tensor(n).unwrap().dtype();
    assert_eq!(dtype("embedding.weight"), safetensors::Dtype::I8);
    assert_eq!(dtype("embedding.weight_scale"), safetensors::Dtype::F32);
    assert_eq!(
        dtype("decoder.layers.1.ffn.fc1.weight"),
        safetensors::Dtype::I8
    );
    assert_eq!(
        dtype("decoder.layers.1.ffn.fc1.bias"),
        safetensors::Dtype::F32
    );
    assert_eq!(
        dtype("encoder.layers.0.ffn_norm.weight"),
        safetensors::Dtype::F32
    );
    assert_eq!(file.tensor("embedding.weight_scale").unwrap().shape(), [60]);

    let loaded = Bundle::from_bytes(&files, &device()).unwrap();
    assert_eq!(loaded.config.weights, Some(WeightDtype::Int8));
    assert!(loaded.host().unwrap().is_int8());
    // Read in int8 only: no f32 copy of the model until something asks for burn's model.
    assert!(!loaded.host().unwrap().has_f32());
    // Each weight within half a step (its row's scale / 2) of the original.
    let original =
        load_weights(b.model().unwrap().config(), &f32_files.weights, &device()).unwrap();
    let (a, q) = (
        values(original.embedding.weight.val()),
        values(loaded.model().unwrap().embedding.weight.val()),
    );
    for (row, (a, q)) in a.chunks(64).zip(q.chunks(64)).enumerate() {
        let step = a.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0;
        for (x, y) in a.iter().zip(q) {
            assert!((x - y).abs() <= step * 0.5 * 1.0001, "row {row}: {x} {y}");
        }
    }
    // Quantizing the loaded (q·scale) weights again finds the same integers.
    let again = loaded.to_bytes(WeightDtype::Int8).unwrap();
    let again = safetensors::SafeTensors::deserialize(&again.weights).unwrap();
    for (name, view) in file.tensors() {
        let other = again.tensor(&name).unwrap();
        if view.dtype() == safetensors::Dtype::I8 {
            assert_eq!(view.data(), other.data(), "{name}");
        } else if name.ends_with("_scale") {
            let floats = |d: &[u8]| -> Vec<f32> {
                d.chunks(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect()
            };
            for (s, t) in floats(view.data()).iter().zip(floats(other.data())) {
                assert!((s - t).abs() <= s * 2e-7, "{name}: {s} {t}");
            }
        }
    }
    // And it still translates, close to the f32 model.
    let source = loaded.tokenizer.encode("a small dog runs").unwrap();
    let options = transduce::DecodeOptions::default();
    let outputs = transduce::decode::best_outputs(loaded.scorer(), &[source], &options, None);
    assert!(outputs.is_ok());
}

/// An int8 bundle on the CPU that lets go of its weights file decodes as before, from
/// the host decoder alone; asking for burn's model then says why there is none.
#[test]
fn released_weights_decode_the_same_and_refuse_a_model() {
    let files = bundle(ModelConfig::tiny())
        .to_bytes(WeightDtype::Int8)
        .unwrap();
    let kept = Bundle::from_bytes(&files, &device()).unwrap();
    let mut released = Bundle::from_bytes(&files, &device()).unwrap();
    released.release_weights();
    let sources: Vec<Vec<u32>> = ["a small dog runs", "two men play"]
        .iter()
        .map(|s| kept.tokenizer.encode(s).unwrap())
        .collect();
    let options = transduce::DecodeOptions {
        beam: 2,
        ..transduce::DecodeOptions::default()
    };
    let want = transduce::decode::best_outputs(kept.scorer(), &sources, &options, None).unwrap();
    let got = transduce::decode::best_outputs(released.scorer(), &sources, &options, None).unwrap();
    assert_eq!(got, want);
    let Err(e) = released.model() else {
        panic!("a model from released weights")
    };
    assert!(e.to_string().contains("release_weights"), "{e}");
    // The bundle that kept them still builds its model.
    assert!(kept.model().is_ok());
}

/// Each way an int8 bundle can be wrong gives one error naming the tensor.
#[test]
fn bad_int8_bundles_name_the_tensor() {
    let files = unchecked(
        bundle(ModelConfig::tiny())
            .to_bytes(WeightDtype::Int8)
            .unwrap(),
    );
    let scale = "decoder.layers.0.ffn.fc2.weight_scale";
    // What is wrong, the damaged bundle, and whether an error is the one expected.
    type Case = (&'static str, BundleFiles, fn(&Error) -> bool);
    let cases: Vec<Case> = vec![
        (
            "a scale too few",
            edit_int8(&files, |n, d, mut s, mut b| {
                if n == scale {
                    s[0] -= 1;
                    b.truncate(b.len() - 4);
                }
                Some((d, s, b))
            }),
            |e| matches!(e, Error::ShapeMismatch { .. }),
        ),
        (
            "a NaN scale",
            edit_int8(&files, |n, d, s, mut b| {
                if n == scale {
                    b[4..8].copy_from_slice(&f32::NAN.to_le_bytes());
                }
                Some((d, s, b))
            }),
            |e| matches!(e, Error::CorruptWeights(_)),
        ),
        (
            "a negative scale",
            edit_int8(&files, |n, d, s, mut b| {
                if n == scale {
                    b[0..4].copy_from_slice(&(-1.0f32).to_le_bytes());
                }
                Some((d, s, b))
            }),
            |e| matches!(e, Error::CorruptWeights(_)),
        ),
        (
            "scales in f16",
            edit_int8(&files, |n, d, s, b| {
                if n == scale {
                    let half: Vec<u8> = b
                        .chunks(4)
                        .flat_map(|c| {
                            half::f16::from_f32(f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                                .to_le_bytes()
                        })
                        .collect();
                    return Some((safetensors::Dtype::F16, s, half));
                }
                Some((d, s, b))
            }),
            |e| matches!(e, Error::UnsupportedDtype { .. }),
        ),
        (
            "no scales",
            edit_int8(&files, |n, d, s, b| (n != scale).then_some((d, s, b))),
            |e| matches!(e, Error::MissingTensor(_)),
        ),
    ];
    for (what, bad, expected) in cases {
        let e = err(&bad);
        assert!(expected(&e), "{what}: {e}");
        assert!(e.to_string().contains(scale), "{what}: {e}");
    }
    // int8 where the format keeps f32 (a LayerNorm gain).
    let norm = "encoder.layers.0.ffn_norm.weight";
    let bad = edit_int8(&files, |n, d, s, b| {
        if n == norm {
            return Some((safetensors::Dtype::I8, s, vec![1; b.len() / 4]));
        }
        Some((d, s, b))
    });
    let e = err(&bad);
    assert!(
        matches!(e, Error::UnsupportedDtype { .. }) && e.to_string().contains(norm),
        "{e}"
    );
    // A config that says int8 over f16 weights.
    let mut lying = unchecked(
        bundle(ModelConfig::tiny())
            .to_bytes(WeightDtype::F16)
            .unwrap(),
    );
    lying.config = String::from_utf8(lying.config)
        .unwrap()
        .replace("\"weights\": \"f16\"", "\"weights\": \"int8\"")
        .into_bytes();
    let e = err(&lying);
    assert!(e.to_string().contains("weights"), "{e}");
}
