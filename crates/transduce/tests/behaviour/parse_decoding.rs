//! The parse constraint through the model's decoders: whatever an (untrained) model
//! prefers, every constrained output is a tree with one slot per source word.

use crate::common::*;
use transduce::decode::{DecodeOptions, beam_search, greedy};
use transduce::task::TreeConstraint;
use transduce::task::parse::{ParseConstraint, delinearize};
use transduce::tokenizer::EOS;

const VOCAB: [&str; 13] = [
    "<pad>", "<s>", "</s>", "<unk>", "XX", "(S", ")S", "(NP", ")NP", "(VP", ")VP", "(PP", ")PP",
];

#[test]
fn constrained_outputs_are_trees_over_the_source_words() {
    let rules = ParseConstraint::new(&VOCAB, EOS);
    let mut unconstrained_broken = 0;
    let sources: Vec<Vec<u32>> = (1..=6u64)
        .map(|n| random_ids(n, n as usize, 4, 13))
        .collect();
    for seed in 0..3 {
        let model = tiny_model(VOCAB.len(), 40 + seed);
        for beam in [1, 4] {
            let options = DecodeOptions {
                beam,
                alpha: 0.3,
                max_extra: 30,
                ..DecodeOptions::default()
            };
            let constraint = TreeConstraint {
                rules: &rules,
                words: sources.iter().map(Vec::len).collect(),
                max_len: sources
                    .iter()
                    .map(|s| s.len() + options.max_extra)
                    .collect(),
                enforce: true,
                focus: None,
            };
            let outputs: Vec<Vec<u32>> = if beam == 1 {
                greedy(&model, &sources, &options, Some(&constraint))
                    .unwrap()
                    .into_iter()
                    .map(|h| h.tokens)
                    .collect()
            } else {
                beam_search(&model, &sources, &options, Some(&constraint))
                    .unwrap()
                    .into_iter()
                    .map(|h| h[0].tokens.clone())
                    .collect()
            };
            for (src, out) in sources.iter().zip(outputs) {
                let tokens: Vec<&str> = out.iter().map(|&id| VOCAB[id as usize]).collect();
                let words: Vec<String> = (0..src.len()).map(|i| format!("w{i}")).collect();
                let tree = delinearize(&tokens, &words);
                assert!(
                    tree.is_ok(),
                    "seed {seed} beam {beam}: {tokens:?} → {tree:?}"
                );
            }
        }
        // Without the constraint the same model does produce broken sequences.
        let free = DecodeOptions {
            beam: 1,
            alpha: 0.3,
            max_extra: 30,
            ..DecodeOptions::default()
        };
        for (src, hyp) in sources
            .iter()
            .zip(greedy(&model, &sources, &free, None).unwrap())
        {
            let tokens: Vec<&str> = hyp.tokens.iter().map(|&id| VOCAB[id as usize]).collect();
            let words: Vec<String> = (0..src.len()).map(|i| format!("w{i}")).collect();
            unconstrained_broken += usize::from(delinearize(&tokens, &words).is_err());
        }
    }
    assert!(unconstrained_broken > 0);
}
