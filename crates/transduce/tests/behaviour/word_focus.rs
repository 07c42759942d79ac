//! Word focus (parsing, beyond the paper): the decoder input of each position receives the
//! encoder state of one source position. Checked against the plain model: it is exactly
//! that addition, cached steps equal the teacher-forced pass, the future never leaks, and a
//! word-focus model refuses to decode without a focus rule.

use crate::common::*;
use transduce::burn::prelude::*;
use transduce::burn::tensor::TensorData;
use transduce::decode::{DecodeOptions, greedy};
use transduce::task::TreeConstraint;
use transduce::task::focus::WordFocus;
use transduce::task::parse::ParseConstraint;
use transduce::tokenizer::{BOS, EOS};
use transduce::{ModelConfig, Transformer};

// 0 PAD, 1 BOS, 2 EOS, 3 UNK, 4 XX, 5-8 brackets, 9.. words (▁-initial or continuations).
const VOCAB: [&str; 14] = [
    "<pad>", "<s>", "</s>", "<unk>", "XX", "(S", ")S", "(NP", ")NP", "▁a", "▁b", "c", "▁d", "e",
];

fn focus_model(seed: u64) -> Transformer {
    let device = device();
    device.seed(seed);
    let config = ModelConfig {
        word_focus: true,
        ..ModelConfig::tiny().with_vocab(VOCAB.len())
    };
    Transformer::new(&config, &device).unwrap()
}

fn focus_ids(rows: &[Vec<Option<usize>>], device: &Device) -> Tensor<2, Int> {
    let t = rows[0].len();
    let data: Vec<i32> = rows
        .iter()
        .flat_map(|r| r.iter().map(|p| p.map_or(-1, |p| p as i32)))
        .collect();
    Tensor::from_data(TensorData::new(data, [rows.len(), t]), device)
}

#[test]
fn focus_adds_the_chosen_encoder_state() {
    let device = device();
    let model = focus_model(11);
    let src: &[u32] = &[9, 10, 11, 12];
    let tgt: &[u32] = &[BOS, 5, 4, 4, 6];
    let memory = model.encode(ids(&[src], &device));
    // Focus outside the source adds nothing: the plain decoder's logits.
    let plain = values(model.decode(&memory, ids(&[tgt], &device)));
    let none = values(model.decode_focused(
        &memory,
        ids(&[tgt], &device),
        Some(focus_ids(&[vec![None; 5]], &device)),
    ));
    assert!(max_abs_diff(&plain, &none) < 1e-6);
    // A focus changes exactly the positions that have one.
    let mut some = vec![None; 5];
    some[3] = Some(2);
    let focused = values(model.decode_focused(
        &memory,
        ids(&[tgt], &device),
        Some(focus_ids(&[some], &device)),
    ));
    let v = VOCAB.len();
    for t in 0..5 {
        let diff = max_abs_diff(&plain[t * v..(t + 1) * v], &focused[t * v..(t + 1) * v]);
        if t < 3 {
            assert!(diff < 1e-6, "position {t} before the focus moved by {diff}");
        } else {
            assert!(diff > 1e-3, "position {t} ignores the focus ({diff})");
        }
    }
}

#[test]
fn cached_steps_with_focus_equal_the_full_pass() {
    let device = device();
    let model = focus_model(12);
    let rule = WordFocus::from_vocab(&VOCAB).unwrap();
    let src_a: Vec<u32> = vec![9, 11, 10, 12, 13];
    let src_b: Vec<u32> = vec![10, 12, 0, 0, 0];
    let tgt_a: Vec<u32> = vec![BOS, 5, 7, 4, 8, 4, 4, 6];
    let tgt_b: Vec<u32> = vec![BOS, 5, 4, 7, 4, 8, 6, 2];
    let focus_a = rule.positions(&src_a, &tgt_a);
    let focus_b = rule.positions(&src_b[..2], &tgt_b);
    assert_eq!(
        focus_a,
        [
            Some(0),
            Some(0),
            Some(0),
            Some(2),
            Some(2),
            Some(3),
            None,
            None
        ]
    );
    let memory = model.encode(ids(&[&src_a, &src_b], &device));
    let full = values(model.decode_focused(
        &memory,
        ids(&[&tgt_a, &tgt_b], &device),
        Some(focus_ids(&[focus_a.clone(), focus_b.clone()], &device)),
    ));
    let v = VOCAB.len();
    let t = tgt_a.len();
    let mut state = model.start_decoding(&memory);
    for step in 0..t {
        let tokens = Tensor::<1, Int>::from_data([tgt_a[step] as i32, tgt_b[step] as i32], &device);
        let focus = Tensor::<1, Int>::from_data(
            [focus_a[step], focus_b[step]].map(|p| p.map_or(-1, |p| p as i32)),
            &device,
        );
        let logits = values(model.decode_step_focused(&mut state, tokens, Some(focus)));
        for row in 0..2 {
            let expected = &full[(row * t + step) * v..(row * t + step + 1) * v];
            let got = &logits[row * v..(row + 1) * v];
            let diff = max_abs_diff(expected, got);
            assert!(diff < 1e-4, "row {row} step {step}: {diff}");
        }
    }
}

#[test]
fn a_focus_model_needs_a_focus_rule_to_decode() {
    let model = focus_model(13);
    let sources = vec![vec![9u32, 10, 12]];
    let options = DecodeOptions {
        beam: 1,
        alpha: 0.3,
        max_extra: 20,
        ..DecodeOptions::default()
    };
    let err = greedy(&model, &sources, &options, None).unwrap_err();
    assert!(err.to_string().contains("word_focus"), "{err}");

    // Through the parse constraint (with its focus rule) it decodes, and each output is a
    // tree over the three words.
    let rules = ParseConstraint::new(&VOCAB, EOS);
    let rule = WordFocus::from_vocab(&VOCAB).unwrap();
    let constraint = TreeConstraint {
        rules: &rules,
        words: vec![3],
        max_len: vec![23],
        enforce: true,
        focus: Some((&rule, vec![rule.word_starts(&sources[0])])),
    };
    let out = greedy(&model, &sources, &options, Some(&constraint)).unwrap();
    let slots = out[0].tokens.iter().filter(|&&id| id == 4).count();
    assert_eq!(slots, 3, "{:?}", out[0].tokens);
}
