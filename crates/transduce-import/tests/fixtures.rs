//! Imported Marian fixtures against transformers (tests/fixtures/marian, built once by
//! scripts/fixtures/marian.py with transformers 5.24): teacher-forced logits within 1e-4;
//! greedy and beam 4 outputs and beam scores equal to `generate`'s on the burn path, the
//! host decoder in f32 and the GPU decoder; int8 held to a stated agreement.

use std::collections::HashMap;

use safetensors::SafeTensors;
use serde_json::Value;
use transduce::burn::prelude::*;
use transduce::decode::{self, DecodeOptions};
use transduce::model::token_tensor;
use transduce::tokenizer::{BOS, EOS};
use transduce::{Bundle, WeightDtype};

use transduce_import::vocab::{parse_vocab, renumber};

mod common;
use common::{fixture, imported_files};

/// The fixtures whose outputs are held to transformers': the 2020 layout (`swish`, `relu`,
/// `relu-copy`), a tiny student's depths (`student`: 6 encoder, 2 decoder layers) and the
/// tc layout (`tc`: byte fallback, a joint sorted vocabulary with `<s>` among its rows and
/// the end id inside it), and a model of many targets (`bible`: its `>>deu<<` and `>>nld<<`
/// tokens ask for different outputs of one source).
const MODELS: [&str; 6] = ["swish", "relu", "relu-copy", "student", "tc", "bible"];

/// A fixture's Marian ids, from its config.json.
struct Ids {
    pad: u32,
    eos: u32,
    /// Marian id → our id.
    ours: HashMap<u32, u32>,
}

/// The fixture imported and loaded on the CPU, with its ids.
fn imported(model: &str, weights: WeightDtype) -> (Bundle, Ids) {
    let dir = fixture(model);
    let files = imported_files(model, weights).files;
    let bundle = Bundle::from_bytes(&files, &Device::flex()).unwrap();
    let config: Value =
        serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
    let id = |field: &str| config[field].as_u64().unwrap() as u32;
    let (pad, eos) = (id("pad_token_id"), id("eos_token_id"));
    let vocab = parse_vocab(&std::fs::read(dir.join("vocab.json")).unwrap()).unwrap();
    let unk = vocab.iter().find(|(p, _)| p == "<unk>").unwrap().1;
    let order = renumber(&vocab, pad, eos, unk).unwrap();
    // Every Marian row has one place (Marian's pad is our <s>; a Marian <s> is our PAD).
    let ours: HashMap<u32, u32> = order
        .marian
        .iter()
        .enumerate()
        .filter_map(|(ours, m)| m.map(|m| (m, ours as u32)))
        .collect();
    (bundle, Ids { pad, eos, ours })
}

fn reference(model: &str) -> Value {
    serde_json::from_slice(&std::fs::read(fixture(model).join("reference.json")).unwrap()).unwrap()
}

fn ids(v: &Value) -> Vec<u32> {
    common::ids(v)
}

/// A reference source (`input_ids`, closed by Marian's `</s>`) as our source: our ids,
/// without the EOS the model adds itself.
fn source(marian: &[u32], map: &Ids) -> Vec<u32> {
    let (last, body) = marian.split_last().unwrap();
    assert_eq!(*last, map.eos, "reference sources end with </s>");
    body.iter().map(|m| map.ours[m]).collect()
}

/// A reference output (decoder start, tokens, `</s>`) as our output ids (tokens only).
fn output(marian: &[u32], map: &Ids) -> Vec<u32> {
    assert_eq!((marian[0], *marian.last().unwrap()), (map.pad, map.eos));
    marian[1..marian.len() - 1]
        .iter()
        .map(|m| map.ours[m])
        .collect()
}

#[test]
fn teacher_forced_logits_equal_transformers() {
    for model in MODELS {
        let (bundle, map) = imported(model, WeightDtype::F32);
        let logits_file = std::fs::read(fixture(model).join("logits.safetensors")).unwrap();
        let logits_file = SafeTensors::deserialize(&logits_file).unwrap();
        let reference = reference(model);
        let mut worst = 0f32;
        for pair in reference["teacher_forced"].as_array().unwrap() {
            let src = source(&ids(&pair["input_ids"]), &map);
            let src = bundle.config.model.source_row(&src);
            let tgt_in: Vec<u32> = ids(&pair["decoder_input_ids"])
                .iter()
                .map(|&m| if m == map.pad { BOS } else { map.ours[&m] })
                .collect();
            let device = bundle.model().unwrap().device();
            let ours = bundle
                .model()
                .unwrap()
                .forward(
                    token_tensor(&[src], &device).unwrap(),
                    token_tensor(std::slice::from_ref(&tgt_in), &device).unwrap(),
                )
                .into_data()
                .try_to_vec::<f32>()
                .unwrap();
            let view = logits_file
                .tensor(pair["logits"].as_str().unwrap())
                .unwrap();
            let theirs: Vec<f32> = view
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            let (t, v) = (view.shape()[0], view.shape()[1]);
            assert_eq!(t, tgt_in.len());
            let ours_v = bundle.config.model.vocab_size;
            for pos in 0..t {
                for (m, &their) in theirs[pos * v..(pos + 1) * v].iter().enumerate() {
                    // Every column, a Marian <s> row's (our PAD) included: the softmax's.
                    let col = map.ours[&(m as u32)] as usize;
                    let diff = (ours[pos * ours_v + col] - their).abs();
                    worst = worst.max(diff);
                }
            }
        }
        eprintln!("{model}: largest logit difference {worst:e}");
        assert!(worst < 1e-4, "{model}: logits differ by {worst}");
    }
}

/// A decoder under test: each source's best output and its score.
type Decode<'a> = &'a dyn Fn(&[Vec<u32>], &DecodeOptions) -> Vec<(Vec<u32>, f64)>;

/// Greedy and beam 4 through `models`, against `generate`'s outputs; returns the beam
/// scores' largest difference from `sequences_scores`.
fn assert_generate_outputs(
    what: &str,
    reference: &Value,
    map: &Ids,
    decoding: &DecodeOptions,
    decode: Decode<'_>,
) -> f64 {
    let cases = reference["generate"].as_array().unwrap();
    let sources: Vec<Vec<u32>> = cases
        .iter()
        .map(|c| source(&ids(&c["input_ids"]), map))
        .collect();
    let mut worst_score = 0f64;
    for (beam, key) in [(1, "greedy"), (4, "beam4")] {
        let options = DecodeOptions {
            beam,
            ..decoding.clone()
        };
        let got = decode(&sources, &options);
        for (i, (case, (tokens, score))) in cases.iter().zip(&got).enumerate() {
            let want = output(&ids(&case[key]["ids"]), map);
            assert_eq!(
                tokens, &want,
                "{what}, {key}, sentence {i}: {}",
                case["text"]
            );
            if let Some(theirs) = case[key]["score"].as_f64() {
                worst_score = worst_score.max((score - theirs).abs());
            }
        }
    }
    worst_score
}

#[test]
fn generate_outputs_are_equal_on_burn_and_the_host_decoder() {
    for model in MODELS {
        let (bundle, map) = imported(model, WeightDtype::F32);
        let reference = reference(model);
        assert_eq!(bundle.config.decoding.beam, 4);
        let host = bundle.host().unwrap();
        let on_host = |sources: &[Vec<u32>], options: &DecodeOptions| -> Vec<(Vec<u32>, f64)> {
            best_with_scores(decode::Ensemble::from(host), sources, options)
        };
        let worst = assert_generate_outputs(
            &format!("{model} host f32"),
            &reference,
            &map,
            &bundle.config.decoding,
            &on_host,
        );
        eprintln!("{model} host: beam scores within {worst:e} of sequences_scores");
        assert!(worst < 1e-4, "{model}: scores differ by {worst}");
        let on_burn = |sources: &[Vec<u32>], options: &DecodeOptions| -> Vec<(Vec<u32>, f64)> {
            best_with_scores(
                decode::Ensemble::from(bundle.model().unwrap()),
                sources,
                options,
            )
        };
        assert_generate_outputs(
            &format!("{model} burn"),
            &reference,
            &map,
            &bundle.config.decoding,
            &on_burn,
        );
    }
}

/// Each source's best hypothesis and its score (greedy: one; beam: the best finished).
fn best_with_scores(
    models: decode::Ensemble<'_>,
    sources: &[Vec<u32>],
    options: &DecodeOptions,
) -> Vec<(Vec<u32>, f64)> {
    if options.beam <= 1 {
        decode::greedy(models, sources, options, None)
            .unwrap()
            .into_iter()
            .map(|h| (h.tokens, h.score))
            .collect()
    } else {
        decode::beam_search(models, sources, options, None)
            .unwrap()
            .into_iter()
            .map(|hyps| {
                let best = &hyps[0];
                (best.tokens.clone(), best.score)
            })
            .collect()
    }
}

#[test]
fn generate_outputs_are_equal_on_the_gpu_decoder() {
    let _gpu = transduce_kernels::testing::gpu_lock();
    let gpu = match pollster::block_on(transduce_gpu::Gpu::new(true)) {
        Ok(gpu) => gpu,
        Err(e) => {
            transduce_testing::skip(format_args!("imported models on the GPU decoder: {e}"));
            return;
        }
    };
    for model in ["swish", "relu", "student", "tc", "bible"] {
        let (bundle, map) = imported(model, WeightDtype::F32);
        let reference = reference(model);
        let on_gpu = transduce_gpu::GpuModel::new(&gpu, bundle.host().unwrap());
        let decode = |sources: &[Vec<u32>], options: &DecodeOptions| -> Vec<(Vec<u32>, f64)> {
            pollster::block_on(on_gpu.best_outputs(sources, options, None))
                .unwrap()
                .into_iter()
                .map(|tokens| (tokens, f64::NAN))
                .collect()
        };
        assert_generate_outputs(
            &format!("{model} GPU"),
            &reference,
            &map,
            &bundle.config.decoding,
            &decode,
        );
    }
}

#[test]
fn int8_keeps_the_outputs_of_models_sure_of_them() {
    // The goal: int8 equal to f32 on ≥ 95% of the outputs of fixtures whose
    // outputs are not near ties: `swish` and `relu-copy` (both trained 1,500 steps to
    // copy; smallest greedy logit margins 1.79 and 0.49), greedy and beam 4. `relu` (the
    // reverser, trained a third as long so its beam search often differs from greedy:
    // margins down to 0.008) is held to its own rule: an output may change only where
    // f32's greedy margin is below 0.2, and 3 of 4 beam outputs stay.
    // Measured: swish 60/60, relu-copy 60/60; relu greedy 21/30, every change at a margin
    // < 0.16, beam 24/30. CTranslate2 4.8.5's int8 against its float32 on the relu folder:
    // greedy 23/30, beam 26/30 (its activations are 8-bit, ours 7-bit: `host/int8.rs` says
    // why).
    let (mut same, mut total) = (0, 0);
    for model in ["swish", "relu-copy", "relu"] {
        let (f32_bundle, map) = imported(model, WeightDtype::F32);
        let (int8_bundle, _) = imported(model, WeightDtype::Int8);
        assert!(int8_bundle.host().unwrap().is_int8());
        let reference = reference(model);
        let cases = reference["generate"].as_array().unwrap();
        let sources: Vec<Vec<u32>> = cases
            .iter()
            .map(|c| source(&ids(&c["input_ids"]), &map))
            .collect();
        for beam in [1, 4] {
            let options = DecodeOptions {
                beam,
                ..f32_bundle.config.decoding.clone()
            };
            let a =
                decode::best_outputs(f32_bundle.host().unwrap(), &sources, &options, None).unwrap();
            let b = decode::best_outputs(int8_bundle.host().unwrap(), &sources, &options, None)
                .unwrap();
            let changed: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
            eprintln!(
                "{model}, beam {beam}: int8 equal to f32 on {}/{}",
                a.len() - changed.len(),
                a.len()
            );
            match (model, beam) {
                ("relu", 1) => {
                    for &i in &changed {
                        let margin = cases[i]["greedy_min_margin"].as_f64().unwrap();
                        assert!(
                            margin < 0.2,
                            "{model}: sentence {i} changed at margin {margin}"
                        );
                    }
                }
                ("relu", _) => assert!(
                    changed.len() * 4 <= a.len(),
                    "{model} beam {beam}: {changed:?}"
                ),
                _ => {
                    same += a.len() - changed.len();
                    total += a.len();
                }
            }
        }
    }
    eprintln!("models sure of their outputs: int8 equal to f32 on {same}/{total}");
    assert!(
        same * 100 >= total * 95,
        "int8 equal to f32 on {same}/{total}, below 95%"
    );
}

#[test]
fn outputs_end_without_eos_and_sources_get_it() {
    let (bundle, _) = imported("swish", WeightDtype::F32);
    assert!(bundle.config.model.source_eos);
    assert_eq!(bundle.config.model.source_row(&[7, 8]), vec![7, 8, EOS]);
}
