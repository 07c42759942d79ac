//! Behaviour of the §3 architecture, checked against properties that must hold exactly:
//! causality, padding invariance, cache equivalence, weight tying.

use crate::common::*;
use transduce::burn::prelude::*;
use transduce::tokenizer::{BOS, PAD};
use transduce::{ModelConfig, Transformer};

#[test]
fn changing_a_future_target_token_never_changes_earlier_outputs() {
    let model = tiny_model(40, 1);
    let device = device();
    let src = ids(&[&[5, 9, 12, 7, 30]], &device);
    let tgt: Vec<u32> = vec![BOS, 8, 14, 21, 6, 17, 33];
    let base = values(model.forward(src.clone(), ids(&[&tgt], &device)));
    let v = 40;
    for j in 1..tgt.len() {
        let mut changed = tgt.clone();
        changed[j] = if tgt[j] == 10 { 11 } else { 10 };
        let out = values(model.forward(src.clone(), ids(&[&changed], &device)));
        // Positions before j: identical.
        let before = max_abs_diff(&base[..j * v], &out[..j * v]);
        assert_eq!(before, 0.0, "position < {j} changed by {before}");
        // Position j itself sees the new token, so it must change.
        let at = max_abs_diff(&base[j * v..(j + 1) * v], &out[j * v..(j + 1) * v]);
        assert!(at > 1e-4, "position {j} did not see its own input");
    }
}

#[test]
fn source_padding_changes_nothing() {
    let model = tiny_model(40, 2);
    let device = device();
    let src: Vec<u32> = vec![5, 9, 12, 7, 30];
    let mut padded = src.clone();
    padded.extend([PAD; 4]);
    let tgt: Vec<u32> = vec![BOS, 8, 14, 21];

    let plain = model.encode(ids(&[&src], &device));
    let with_pad = model.encode(ids(&[&padded], &device));
    let d = model.config().d_model;
    let a = values(plain.states.clone());
    let b = values(with_pad.states.clone());
    let diff = max_abs_diff(&a, &b[..src.len() * d]);
    assert!(diff < 1e-5, "encoder outputs moved by {diff}");

    let la = values(model.decode(&plain, ids(&[&tgt], &device)));
    let lb = values(model.decode(&with_pad, ids(&[&tgt], &device)));
    let diff = max_abs_diff(&la, &lb);
    assert!(diff < 1e-5, "decoder logits moved by {diff}");

    // In a batch next to a longer sentence, the short one's logits are its own.
    let long: Vec<u32> = vec![5, 9, 12, 7, 30, 11, 19, 23, 4];
    let batch = model.decode(
        &model.encode(ids(&[&padded, &long], &device)),
        ids(&[&tgt, &tgt], &device),
    );
    let lc = values(batch);
    let diff = max_abs_diff(&la, &lc[..la.len()]);
    assert!(diff < 1e-5, "batched logits moved by {diff}");
}

#[test]
fn cached_steps_equal_the_full_pass() {
    for positional in [
        transduce::Positional::Sinusoid,
        transduce::Positional::Learned,
    ] {
        let device = device();
        device.seed(3);
        let config = ModelConfig {
            positional,
            ..ModelConfig::tiny().with_vocab(50)
        };
        let model = Transformer::new(&config, &device).unwrap();
        let src_a: Vec<u32> = vec![5, 9, 12, 7, 30, 44];
        let src_b: Vec<u32> = vec![6, 8, 10, PAD, PAD, PAD];
        let tgt_a: Vec<u32> = vec![BOS, 8, 14, 21, 6, 17, 33, 40, 12];
        let tgt_b: Vec<u32> = vec![BOS, 9, 9, 31, 4, 16, 35, 41, 13];
        let memory = model.encode(ids(&[&src_a, &src_b], &device));
        let full = values(model.decode(&memory, ids(&[&tgt_a, &tgt_b], &device)));
        let v = 50;
        let t = tgt_a.len();
        let mut state = model.start_decoding(&memory);
        for step in 0..t {
            let tokens =
                Tensor::<1, Int>::from_data([tgt_a[step] as i32, tgt_b[step] as i32], &device);
            let logits = values(model.decode_step(&mut state, tokens));
            for row in 0..2 {
                let expected = &full[(row * t + step) * v..(row * t + step + 1) * v];
                let got = &logits[row * v..(row + 1) * v];
                let diff = max_abs_diff(expected, got);
                assert!(diff < 1e-4, "{positional:?} row {row} step {step}: {diff}");
            }
        }
    }
}

#[test]
fn output_projection_is_the_embedding_matrix() {
    let device = device();
    let shared = ModelConfig::tiny().with_vocab(30);
    let model = Transformer::new(&shared, &device).unwrap();
    assert!(model.output.is_none() && model.src_embedding.is_none());
    // The parameter count is the formula's: one V×d matrix, not three.
    use transduce::burn::module::Module;
    assert_eq!(model.num_params(), shared.num_params());
    let untied = ModelConfig {
        share_embeddings: false,
        ..shared.clone()
    };
    let model_untied = Transformer::new(&untied, &device).unwrap();
    assert_eq!(model_untied.num_params(), untied.num_params());
    assert_eq!(untied.num_params() - shared.num_params(), 2 * 30 * 64);

    // logits = h · Eᵀ with E the embedding weight itself.
    let h = Tensor::<3>::random(
        [1, 3, 64],
        transduce::burn::tensor::Distribution::Default,
        &device,
    );
    let logits = values(model.project(h.clone()));
    let e = model.embedding.weight.val();
    let manual = values(h.reshape([3, 64]).matmul(e.transpose()));
    assert!(max_abs_diff(&logits, &manual) < 1e-5);
}

#[test]
fn every_table3_row_builds_with_the_formula_count() {
    // Built models (small vocabulary, so this stays fast) have exactly the analytic count.
    use transduce::burn::module::Module;
    let device = device();
    for row in transduce::config::table3()
        .into_iter()
        .filter(|r| ["A1", "B1", "C1", "E"].contains(&r.name))
    {
        let config = ModelConfig {
            n_layers: 1,
            max_len: 64,
            ..row.config.with_vocab(100)
        };
        let model = Transformer::new(&config, &device).unwrap();
        assert_eq!(model.num_params(), config.num_params(), "{}", row.name);
    }
}
