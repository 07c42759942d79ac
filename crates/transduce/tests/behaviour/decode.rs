//! Decoding (§6.1) against independent references: greedy, exhaustive search under the
//! length penalty (for one model and for an ensemble's mean), and one-sentence-at-a-time
//! runs.

use crate::common::*;
use transduce::burn::tensor::activation::log_softmax;
use transduce::decode::{DecodeOptions, Ensemble, beam_search, greedy, length_penalty};
use transduce::tokenizer::{BOS, EOS, PAD};
use transduce::{Hypothesis, Transformer};

fn sources() -> Vec<Vec<u32>> {
    vec![
        random_ids(1, 5, 4, 30),
        random_ids(2, 9, 4, 30),
        random_ids(3, 2, 4, 30),
        random_ids(4, 7, 4, 30),
    ]
}

#[test]
fn length_penalty_is_gnmts() {
    // lp(Y) = ((5 + |Y|) / 6)^α: lp(1) = 1 for any α; lp(7) = 2^α.
    assert_eq!(length_penalty(1, 0.6), 1.0);
    assert!((length_penalty(7, 0.6) - 2f64.powf(0.6)).abs() < 1e-12);
    assert_eq!(length_penalty(20, 0.0), 1.0);
}

#[test]
fn beam_of_one_is_greedy() {
    let model = tiny_model(30, 11);
    let options = DecodeOptions {
        beam: 1,
        alpha: 0.6,
        max_extra: 8,
        ..DecodeOptions::default()
    };
    let srcs = sources();
    let g = greedy(&model, &srcs, &options, None).unwrap();
    let b = beam_search(&model, &srcs, &options, None).unwrap();
    for (i, (g, b)) in g.iter().zip(&b).enumerate() {
        assert_eq!(g.tokens, b[0].tokens, "sentence {i}");
        assert!((g.score - b[0].score).abs() < 1e-4, "sentence {i}");
    }
}

/// Log-probability of every allowed next token after `prefix`, from a full forward pass
/// (no cache), with PAD and BOS excluded as in the decoder.
fn next_log_probs(model: &Transformer, src: &[u32], prefix: &[u32]) -> Vec<f64> {
    let device = device();
    let mut tgt = vec![BOS];
    tgt.extend_from_slice(prefix);
    let logits = model.forward(ids(&[src], &device), ids(&[&tgt], &device));
    let v = model.config().vocab_size;
    let all = values(log_softmax(logits, 2));
    let last = &all[prefix.len() * v..(prefix.len() + 1) * v];
    last.iter().map(|&x| x as f64).collect()
}

/// Best output by exhaustive enumeration of every sequence of at most `limit` tokens
/// (EOS last) over the allowed vocabulary, ranked by log P / lp. With several models,
/// log P of each token is the mean of theirs (an ensemble's score).
fn exhaustive(models: &[&Transformer], src: &[u32], limit: usize, alpha: f64) -> Hypothesis {
    let vocab = models[0].config().vocab_size as u32;
    let symbols: Vec<u32> = (0..vocab)
        .filter(|&t| t != PAD && t != BOS && t != EOS)
        .collect();
    let mut best = Hypothesis {
        tokens: vec![],
        log_prob: f64::NEG_INFINITY,
        score: f64::NEG_INFINITY,
    };
    let mut frontier: Vec<(Vec<u32>, f64)> = vec![(vec![], 0.0)];
    while let Some((prefix, lp)) = frontier.pop() {
        let mut next = vec![0.0; vocab as usize];
        for m in models {
            for (sum, lp) in next.iter_mut().zip(next_log_probs(m, src, &prefix)) {
                *sum += lp / models.len() as f64;
            }
        }
        let ended = lp + next[EOS as usize];
        let score = ended / length_penalty(prefix.len() + 1, alpha);
        if score > best.score {
            best = Hypothesis {
                tokens: prefix.clone(),
                log_prob: ended,
                score,
            };
        }
        if prefix.len() + 1 < limit {
            for &s in &symbols {
                let mut longer = prefix.clone();
                longer.push(s);
                frontier.push((longer, lp + next[s as usize]));
            }
        }
    }
    best
}

#[test]
fn wide_beam_finds_the_exhaustive_optimum() {
    // Vocabulary of 7: four real symbols besides PAD/BOS/EOS. Outputs of up to 4 tokens
    // (source of 1 + max_extra 3): 1 + 4 + 16 + 64 = 85 sequences, all enumerated.
    let mut greedy_was_wrong = 0;
    for seed in 0..6u64 {
        let model = tiny_model(7, 100 + seed);
        let src = vec![3 + (seed % 4) as u32];
        for alpha in [0.0, 0.6, 1.5] {
            let options = DecodeOptions {
                beam: 100,
                alpha,
                max_extra: 3,
                ..DecodeOptions::default()
            };
            let limit = src.len() + options.max_extra;
            let truth = exhaustive(&[&model], &src, limit, alpha);
            let found =
                &beam_search(&model, std::slice::from_ref(&src), &options, None).unwrap()[0][0];
            assert_eq!(found.tokens, truth.tokens, "seed {seed} alpha {alpha}");
            assert!((found.score - truth.score).abs() < 1e-4);
            let g = &greedy(&model, std::slice::from_ref(&src), &options, None).unwrap()[0];
            greedy_was_wrong += usize::from(g.tokens != truth.tokens);
        }
    }
    // The search problem is not trivial: greedy misses the optimum somewhere.
    assert!(greedy_was_wrong > 0);
}

#[test]
fn ensemble_beam_finds_the_exhaustive_optimum_of_the_mean() {
    // Two models of different seeds, searched as one: the optimum under the mean of their
    // log-probabilities, enumerated as above.
    let mut differs_from_a_member = 0;
    for seed in 0..4u64 {
        let a = tiny_model(7, 200 + seed);
        let b = tiny_model(7, 300 + seed);
        let ensemble = Ensemble::new(vec![&a, &b]).unwrap();
        let src = vec![3 + (seed % 4) as u32];
        // Untrained models end at once for small α; a large α rewards length.
        for alpha in [0.6, 2.0, 4.0] {
            let options = DecodeOptions {
                beam: 100,
                alpha,
                max_extra: 3,
                ..DecodeOptions::default()
            };
            let limit = src.len() + options.max_extra;
            let truth = exhaustive(&[&a, &b], &src, limit, alpha);
            let found =
                &beam_search(&ensemble, std::slice::from_ref(&src), &options, None).unwrap()[0][0];
            assert_eq!(found.tokens, truth.tokens, "seed {seed} alpha {alpha}");
            assert!((found.log_prob - truth.log_prob).abs() < 1e-4);
            assert!((found.score - truth.score).abs() < 1e-4);
            for m in [&a, &b] {
                let alone = exhaustive(&[m], &src, limit, alpha);
                differs_from_a_member += usize::from(alone.tokens != truth.tokens);
            }
        }
    }
    // The combination is not trivially one member's choice.
    assert!(differs_from_a_member > 0);
}

#[test]
fn an_ensemble_of_copies_is_the_model() {
    // (a + a) / 2 = a in floating point: two copies score exactly as the model alone.
    let model = tiny_model(30, 13);
    let copies = Ensemble::new(vec![&model, &model]).unwrap();
    let options = DecodeOptions {
        beam: 4,
        alpha: 0.6,
        max_extra: 8,
        ..DecodeOptions::default()
    };
    let srcs = sources();
    assert_eq!(
        beam_search(&copies, &srcs, &options, None).unwrap(),
        beam_search(&model, &srcs, &options, None).unwrap()
    );
    assert_eq!(
        greedy(&copies, &srcs, &options, None).unwrap(),
        greedy(&model, &srcs, &options, None).unwrap()
    );
}

#[test]
fn ensemble_members_must_share_a_vocabulary() {
    let a = tiny_model(30, 1);
    let b = tiny_model(31, 2);
    let e = Ensemble::new(vec![&a, &b]).unwrap_err().to_string();
    assert!(
        e.contains("member 2 has a vocabulary of 31 tokens, member 1 of 30"),
        "{e}"
    );
    let e = Ensemble::new(vec![]).unwrap_err().to_string();
    assert!(e.contains("at least one model"), "{e}");
}

#[test]
fn batched_equals_one_by_one() {
    let model = tiny_model(30, 21);
    let options = DecodeOptions {
        beam: 4,
        alpha: 0.6,
        max_extra: 8,
        ..DecodeOptions::default()
    };
    let srcs = sources();
    let together = beam_search(&model, &srcs, &options, None).unwrap();
    let together_greedy = greedy(&model, &srcs, &options, None).unwrap();
    for (i, src) in srcs.iter().enumerate() {
        let alone = beam_search(&model, std::slice::from_ref(src), &options, None).unwrap();
        assert_eq!(
            alone[0][0].tokens, together[i][0].tokens,
            "beam, sentence {i}"
        );
        assert!((alone[0][0].score - together[i][0].score).abs() < 1e-4);
        let alone = greedy(&model, std::slice::from_ref(src), &options, None).unwrap();
        assert_eq!(
            alone[0].tokens, together_greedy[i].tokens,
            "greedy, sentence {i}"
        );
    }
}

#[test]
fn outputs_respect_the_length_limit_and_end_in_eos() {
    let model = tiny_model(30, 5);
    let options = DecodeOptions {
        beam: 3,
        alpha: 0.6,
        max_extra: 2,
        ..DecodeOptions::default()
    };
    for (src, hyps) in sources()
        .iter()
        .zip(beam_search(&model, &sources(), &options, None).unwrap())
    {
        assert!(!hyps.is_empty() && hyps.len() <= 3);
        for h in &hyps {
            // Output tokens + EOS ≤ input + max_extra.
            assert!(h.tokens.len() < src.len() + 2);
            assert!(!h.tokens.contains(&EOS) && !h.tokens.contains(&PAD));
        }
        assert!(hyps.windows(2).all(|w| w[0].score >= w[1].score));
    }
}

#[test]
fn the_constraint_hook_masks_tokens() {
    let model = tiny_model(30, 8);
    let options = DecodeOptions {
        beam: 2,
        alpha: 0.6,
        max_extra: 6,
        ..DecodeOptions::default()
    };
    // Only even ids (and EOS), and never more than 3 tokens.
    let only_even = |_: usize, prefix: &[u32], allowed: &mut [bool]| {
        for (id, ok) in allowed.iter_mut().enumerate() {
            if id as u32 != EOS && (id % 2 == 1 || prefix.len() >= 3) {
                *ok = false;
            }
        }
    };
    let srcs = sources();
    for hyp in greedy(&model, &srcs, &options, Some(&only_even)).unwrap() {
        assert!(hyp.tokens.len() <= 3 && hyp.tokens.iter().all(|t| t % 2 == 0));
    }
    for hyps in beam_search(&model, &srcs, &options, Some(&only_even)).unwrap() {
        for hyp in hyps {
            assert!(hyp.tokens.len() <= 3 && hyp.tokens.iter().all(|t| t % 2 == 0));
        }
    }
}

#[test]
fn bad_sources_are_errors_not_panics() {
    let model = tiny_model(30, 9);
    let options = DecodeOptions::default();
    assert!(greedy(&model, &[vec![]], &options, None).is_err());
    assert!(greedy(&model, &[vec![99]], &options, None).is_err());
    assert!(beam_search(&model, &[vec![5, PAD]], &options, None).is_err());
    let zero = DecodeOptions { beam: 0, ..options };
    assert!(beam_search(&model, &[vec![5]], &zero, None).is_err());
}

/// Teacher forcing through the search's scorer gives every finished hypothesis the
/// log-probability the search summed for it, on the device and on the host (int8 too),
/// whatever the batch holds; and it refuses what it cannot score.
#[test]
fn forced_log_probs_are_the_searchs_own() {
    use transduce::HostModel;
    use transduce::decode::forced_log_probs;
    let model = tiny_model(30, 11);
    let options = DecodeOptions {
        beam: 4,
        alpha: 0.6,
        max_extra: 8,
        ..DecodeOptions::default()
    };
    let srcs = sources();
    let host = HostModel::new(&model).unwrap();
    let mut int8 = HostModel::new(&model).unwrap();
    int8.quantize();
    let check = |scorer: Ensemble| {
        let found = beam_search(scorer.clone(), &srcs, &options, None).unwrap();
        // Every hypothesis of every sentence in one batch: rows of one source repeat.
        let (mut x, mut y, mut want) = (Vec::new(), Vec::new(), Vec::new());
        for (src, hyps) in srcs.iter().zip(&found) {
            for h in hyps {
                x.push(src.clone());
                y.push(h.tokens.clone());
                want.push(h.log_prob);
            }
        }
        assert!(want.len() > srcs.len());
        let got = forced_log_probs(scorer, &x, &y).unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!((g - w).abs() < 1e-3, "pair {i}: forced {g}, searched {w}");
        }
    };
    check(Ensemble::from(&model));
    check(Ensemble::from(&host));
    check(Ensemble::from(&int8));

    // An independent value: one pair by full forward passes (no cache).
    let (src, tgt) = (srcs[1].clone(), vec![7u32, 9, 12]);
    let mut want = 0.0;
    for t in 0..=tgt.len() {
        let next = tgt.get(t).copied().unwrap_or(EOS);
        want += next_log_probs(&model, &src, &tgt[..t])[next as usize];
    }
    let got = forced_log_probs(&model, std::slice::from_ref(&src), &[tgt]).unwrap()[0];
    assert!((got - want).abs() < 1e-4, "{got} vs {want}");

    for (targets, what) in [
        (vec![vec![7u32, EOS]], "special"),
        (vec![vec![30u32]], "outside"),
        (vec![vec![7u32], vec![8]], "targets"),
    ] {
        let e = forced_log_probs(&model, std::slice::from_ref(&src), &targets).unwrap_err();
        assert!(e.to_string().contains(what), "{what}: {e}");
    }
}
