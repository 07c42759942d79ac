//! The host decoder (`transduce::host`) against the model as burn runs it: next-token
//! log-probabilities equal the teacher-forced pass's, and greedy search, beam search,
//! ensembles and word-focus parsing give the same outputs through either path, for every
//! variant of the model (tied or untied embeddings, sinusoid or learned positions).

use crate::common::*;
use transduce::burn::module::Param;
use transduce::burn::tensor::Distribution;
use transduce::burn::tensor::activation::log_softmax;
use transduce::config::Activation;
use transduce::decode::{DecodeOptions, Ensemble, beam_search, greedy};
use transduce::task::TreeConstraint;
use transduce::task::focus::WordFocus;
use transduce::task::parse::ParseConstraint;
use transduce::tokenizer::{BOS, EOS};
use transduce::{HostModel, ModelConfig, Positional, Transformer};

fn model(config: ModelConfig, seed: u64) -> Transformer {
    let device = device();
    device.seed(seed);
    let mut model = Transformer::new(&config, &device).unwrap();
    // The output bias starts at zero: random values, so a path that drops it differs.
    if let Some(bias) = &model.output_bias {
        let values = bias.val().random_like(Distribution::Normal(0.0, 1.0));
        model.output_bias = Some(Param::from_tensor(values));
    }
    model
}

/// The tiny preset and its variants (Table 3 row E's learned positions, untied
/// embeddings, an imported Marian model's: swish, attention and output biases, sources
/// closed by EOS, and a student's unequal depths), each with a vocabulary of 40.
fn variants() -> Vec<ModelConfig> {
    let tiny = ModelConfig::tiny().with_vocab(40);
    vec![
        ModelConfig {
            n_layers: 3,
            decoder_layers: Some(1),
            activation: Activation::Swish,
            attention_bias: true,
            output_bias: true,
            source_eos: true,
            ..tiny.clone()
        },
        ModelConfig {
            activation: Activation::Swish,
            attention_bias: true,
            output_bias: true,
            source_eos: true,
            ..tiny.clone()
        },
        tiny.clone(),
        ModelConfig {
            positional: Positional::Learned,
            ..tiny.clone()
        },
        ModelConfig {
            share_embeddings: false,
            ..tiny
        },
    ]
}

fn sources() -> Vec<Vec<u32>> {
    vec![
        random_ids(1, 5, 4, 40),
        random_ids(2, 11, 4, 40),
        random_ids(3, 1, 4, 40),
        random_ids(4, 7, 4, 40),
    ]
}

/// Each step's log-probabilities, for every row of a batch of unequal sources, equal the
/// log-softmax of the teacher-forced pass over the same prefix.
#[test]
fn steps_equal_the_teacher_forced_pass() {
    for (v, config) in variants().into_iter().enumerate() {
        let model = model(config, 21 + v as u64);
        let host = HostModel::new(&model).unwrap();
        let srcs = sources();
        let targets: Vec<Vec<u32>> = (0..srcs.len())
            .map(|i| random_ids(50 + i as u64, 6, 3, 40))
            .collect();
        let mut state = host.start(&srcs).unwrap();
        let vocab = 40;
        let mut out = Vec::new();
        for step in 0..6 {
            let last: Vec<u32> = targets
                .iter()
                .map(|t| if step == 0 { BOS } else { t[step - 1] })
                .collect();
            host.step(&mut state, &last, None, &mut out).unwrap();
            for (r, src) in srcs.iter().enumerate() {
                let mut tgt = vec![BOS];
                tgt.extend_from_slice(&targets[r][..step]);
                // The host closes sources with EOS where the model reads it so.
                let src = model.config().source_row(src);
                let logits = model.forward(ids(&[&src], &device()), ids(&[&tgt], &device()));
                let all = values(log_softmax(logits, 2));
                let want = &all[step * vocab..(step + 1) * vocab];
                let diff = max_abs_diff(&out[r * vocab..(r + 1) * vocab], want);
                assert!(diff < 1e-4, "variant {v}, row {r}, step {step}: {diff}");
            }
        }
    }
}

/// Re-ranking rows (repeating, reordering, dropping) keeps each row's own history.
#[test]
fn selected_rows_keep_their_caches() {
    let model = model(ModelConfig::tiny().with_vocab(40), 5);
    let host = HostModel::new(&model).unwrap();
    let srcs = sources();
    let vocab = 40;
    let history: Vec<Vec<u32>> = (0..4).map(|i| random_ids(80 + i, 3, 4, 40)).collect();
    let mut state = host.start(&srcs).unwrap();
    let mut out = Vec::new();
    for step in 0..3 {
        let last: Vec<u32> = history
            .iter()
            .map(|h| if step == 0 { BOS } else { h[step - 1] })
            .collect();
        host.step(&mut state, &last, None, &mut out).unwrap();
    }
    // Rows 3, 3, 0 (repeats and reorders: the gathering path), then 0 and 2 of those
    // (rows only move forward: the in-place path).
    state.select(&[3, 3, 0]);
    state.select(&[0, 2]);
    let kept = [3usize, 0];
    let last: Vec<u32> = kept.iter().map(|&r| history[r][2]).collect();
    host.step(&mut state, &last, None, &mut out).unwrap();
    for (row, &r) in kept.iter().enumerate() {
        let mut fresh = host.start(std::slice::from_ref(&srcs[r])).unwrap();
        let mut want = Vec::new();
        for step in 0..4 {
            let token = if step == 0 { BOS } else { history[r][step - 1] };
            host.step(&mut fresh, &[token], None, &mut want).unwrap();
        }
        let diff = max_abs_diff(&out[row * vocab..(row + 1) * vocab], &want);
        assert!(diff < 1e-5, "row {row}: {diff}");
    }
}

/// Greedy and beam search give the same outputs and scores through both paths.
#[test]
fn searches_match_the_device_path() {
    for (v, config) in variants().into_iter().enumerate() {
        let model = model(config, 31 + v as u64);
        let host = HostModel::new(&model).unwrap();
        let srcs = sources();
        for beam in [1, 4] {
            let options = DecodeOptions {
                beam,
                alpha: 0.6,
                max_extra: 12,
                ..DecodeOptions::default()
            };
            let on_device = beam_search(&model, &srcs, &options, None).unwrap();
            let on_host = beam_search(&host, &srcs, &options, None).unwrap();
            for (i, (d, h)) in on_device.iter().zip(&on_host).enumerate() {
                assert_eq!(d.len(), h.len(), "variant {v}, beam {beam}, sentence {i}");
                for (d, h) in d.iter().zip(h) {
                    assert_eq!(d.tokens, h.tokens, "variant {v}, beam {beam}, sentence {i}");
                    assert!(
                        (d.score - h.score).abs() < 1e-3,
                        "variant {v}, sentence {i}"
                    );
                }
            }
        }
        let options = DecodeOptions {
            beam: 1,
            alpha: 0.6,
            max_extra: 12,
            ..DecodeOptions::default()
        };
        let d = greedy(&model, &srcs, &options, None).unwrap();
        let h = greedy(&host, &srcs, &options, None).unwrap();
        for (i, (d, h)) in d.iter().zip(&h).enumerate() {
            assert_eq!(d.tokens, h.tokens, "variant {v}, greedy, sentence {i}");
        }
    }
}

#[test]
fn ensembles_match_the_device_path() {
    let a = model(ModelConfig::tiny().with_vocab(40), 41);
    let b = model(ModelConfig::tiny().with_vocab(40), 42);
    let (ha, hb) = (HostModel::new(&a).unwrap(), HostModel::new(&b).unwrap());
    let srcs = sources();
    let options = DecodeOptions {
        beam: 3,
        alpha: 1.0,
        max_extra: 10,
        ..DecodeOptions::default()
    };
    let on_device = beam_search(Ensemble::new(vec![&a, &b]).unwrap(), &srcs, &options, None);
    let on_host = beam_search(
        Ensemble::on_host(vec![&ha, &hb]).unwrap(),
        &srcs,
        &options,
        None,
    );
    let (on_device, on_host) = (on_device.unwrap(), on_host.unwrap());
    for (i, (d, h)) in on_device.iter().zip(&on_host).enumerate() {
        let d: Vec<_> = d.iter().map(|h| &h.tokens).collect();
        let h: Vec<_> = h.iter().map(|h| &h.tokens).collect();
        assert_eq!(d, h, "sentence {i}");
    }
    let other = model(ModelConfig::tiny().with_vocab(41), 43);
    let other = HostModel::new(&other).unwrap();
    let err = Ensemble::on_host(vec![&ha, &other]).unwrap_err();
    assert!(err.to_string().contains("vocabulary"), "{err}");
}

/// A word-focus parser decodes the same trees through both paths.
#[test]
fn word_focus_parsing_matches_the_device_path() {
    const VOCAB: [&str; 14] = [
        "<pad>", "<s>", "</s>", "<unk>", "XX", "(S", ")S", "(NP", ")NP", "▁a", "▁b", "c", "▁d", "e",
    ];
    let config = ModelConfig {
        word_focus: true,
        ..ModelConfig::tiny().with_vocab(VOCAB.len())
    };
    let model = model(config, 13);
    let host = HostModel::new(&model).unwrap();
    let sources = vec![vec![9u32, 10, 11, 12], vec![12u32, 13, 9]];
    let rules = ParseConstraint::new(&VOCAB, EOS);
    let rule = WordFocus::from_vocab(&VOCAB).unwrap();
    let constraint = TreeConstraint {
        rules: &rules,
        words: vec![3, 2],
        max_len: vec![24, 23],
        enforce: true,
        focus: Some((&rule, sources.iter().map(|s| rule.word_starts(s)).collect())),
    };
    for beam in [1, 3] {
        let options = DecodeOptions {
            beam,
            alpha: 0.3,
            max_extra: 20,
            ..DecodeOptions::default()
        };
        let d = beam_search(&model, &sources, &options, Some(&constraint)).unwrap();
        let h = beam_search(&host, &sources, &options, Some(&constraint)).unwrap();
        for (i, (d, h)) in d.iter().zip(&h).enumerate() {
            assert_eq!(d[0].tokens, h[0].tokens, "beam {beam}, sentence {i}");
        }
    }
}

/// An int8 bundle's weights read straight into the host decoder ([`HostModel::from_int8`],
/// no f32 copy) decode exactly as the bundle loaded into burn and quantized: the same
/// integers and scales, so the same tokens and the same scores to the bit, for every
/// variant. Widened back, its arrays are the burn model's `q·scale` values.
#[test]
fn int8_weights_read_without_f32_decode_as_the_quantized_model() {
    use transduce::bundle::{WeightDtype, load_weights, save_weights};
    for (v, config) in variants().into_iter().enumerate() {
        let bytes = save_weights(&model(config.clone(), 71 + v as u64), WeightDtype::Int8).unwrap();
        let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let compact = HostModel::from_int8(&config, &file).unwrap().unwrap();
        assert!(compact.is_int8() && !compact.has_f32(), "variant {v}");
        let loaded = load_weights(&config, &bytes, &device()).unwrap();
        let mut reference = HostModel::new(&loaded).unwrap();
        reference.quantize();
        let srcs = sources();
        for beam in [1, 4] {
            let options = DecodeOptions {
                beam,
                alpha: 0.6,
                max_extra: 12,
                ..DecodeOptions::default()
            };
            let want = beam_search(&reference, &srcs, &options, None).unwrap();
            let got = beam_search(&compact, &srcs, &options, None).unwrap();
            for (i, (w, g)) in want.iter().zip(&got).enumerate() {
                let pairs = |h: &[transduce::Hypothesis]| -> Vec<(Vec<u32>, f64)> {
                    h.iter().map(|h| (h.tokens.clone(), h.score)).collect()
                };
                assert_eq!(pairs(w), pairs(g), "variant {v}, beam {beam}, sentence {i}");
            }
        }
        // Widened: the f32 arrays burn's model holds, and the same f32 decoding.
        let expanded = compact.expanded();
        reference.dequantize();
        assert!(expanded.has_f32() && !expanded.is_int8());
        assert_eq!(expanded.embeddings(), reference.embeddings(), "variant {v}");
        assert_eq!(
            expanded.output_table(),
            reference.output_table(),
            "variant {v}"
        );
        for (e, r) in expanded
            .decoder_layers()
            .iter()
            .zip(reference.decoder_layers())
        {
            assert_eq!(e.cross_kv.data, r.cross_kv.data, "variant {v}");
            assert_eq!(e.cross_kv.bias, r.cross_kv.bias, "variant {v}");
        }
        let options = DecodeOptions {
            beam: 4,
            ..DecodeOptions::default()
        };
        let want = beam_search(&reference, &srcs, &options, None).unwrap();
        let got = beam_search(&*expanded, &srcs, &options, None).unwrap();
        assert_eq!(
            want.iter().map(|h| h[0].tokens.clone()).collect::<Vec<_>>(),
            got.iter().map(|h| h[0].tokens.clone()).collect::<Vec<_>>(),
            "variant {v}"
        );
        // A float file is not read this way: the caller loads it through burn.
        let f32_bytes = save_weights(&loaded, WeightDtype::F32).unwrap();
        let f32_file = safetensors::SafeTensors::deserialize(&f32_bytes).unwrap();
        assert!(HostModel::from_int8(&config, &f32_file).unwrap().is_none());
    }
}
