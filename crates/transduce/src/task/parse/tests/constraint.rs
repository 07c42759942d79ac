//! The decoding constraint.

use super::*;

fn small_vocab() -> Vec<String> {
    // `(C` has no closer and `)D` no opener: neither may ever appear.
    s(&[
        "<pad>", "<s>", "</s>", "<unk>", "XX", "(A", ")A", "(B", ")B", "(C", ")D", "junk",
    ])
}

/// Every sequence the automaton lets through to EOS (depth-first over allowed ids),
/// asserting on the way that no prefix is a dead end.
fn accepted(
    c: &ParseConstraint,
    vocab: &[String],
    n: usize,
    max_len: Option<usize>,
) -> Vec<Vec<String>> {
    fn go(
        c: &ParseConstraint,
        vocab: &[String],
        n: usize,
        max_len: Option<usize>,
        prefix: &mut Vec<u32>,
        out: &mut Vec<Vec<String>>,
    ) {
        let mut allowed = vec![true; vocab.len()];
        match max_len {
            Some(max) => c.restrict_within(n, max, prefix, &mut allowed),
            None => c.restrict(n, prefix, &mut allowed),
        }
        assert!(allowed.iter().any(|&a| a), "dead end after {prefix:?}");
        for id in 0..vocab.len() as u32 {
            if !allowed[id as usize] {
                continue;
            }
            if id == EOS {
                out.push(prefix.iter().map(|&i| vocab[i as usize].clone()).collect());
            } else {
                prefix.push(id);
                go(c, vocab, n, max_len, prefix, out);
                prefix.pop();
            }
        }
    }
    let mut out = Vec::new();
    go(c, vocab, n, max_len, &mut Vec::new(), &mut out);
    out
}

/// Every tree with labels A/B over `n` slots and bracket depth ≤ `depth`, linearized.
fn all_trees(n: usize, depth: usize) -> Vec<Vec<String>> {
    // Child sequences over `n` words whose brackets have depth ≤ `d`.
    fn seqs(n: usize, d: usize) -> Vec<Vec<String>> {
        if n == 0 {
            return vec![Vec::new()];
        }
        let mut out = Vec::new();
        for rest in seqs(n - 1, d) {
            let mut v = vec![PLACEHOLDER.to_string()];
            v.extend(rest);
            out.push(v);
        }
        if d > 0 {
            for k in 1..=n {
                for first in brackets(k, d) {
                    for rest in seqs(n - k, d) {
                        let mut v = first.clone();
                        v.extend(rest);
                        out.push(v);
                    }
                }
            }
        }
        out
    }
    fn brackets(n: usize, d: usize) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        for label in ["A", "B"] {
            for inner in seqs(n, d - 1) {
                let mut v = vec![open_token(label)];
                v.extend(inner);
                v.push(close_token(label));
                out.push(v);
            }
        }
        out
    }
    brackets(n, depth)
}

#[test]
fn the_constraint_accepts_exactly_the_trees_within_its_caps() {
    let vocab = small_vocab();
    for (depth, run) in [(3, 3), (3, 2), (2, 1), (4, 2)] {
        let c = ParseConstraint::new(&vocab, EOS).with_caps(depth, run);
        for n in 1..=3 {
            let got: HashSet<Vec<String>> = accepted(&c, &vocab, n, None).into_iter().collect();
            let want: HashSet<Vec<String>> = all_trees(n, depth)
                .into_iter()
                .filter(|t| open_run(t) <= run)
                .collect();
            assert!(!want.is_empty());
            if (depth, run, n) == (3, 3, 3) {
                // 2 · S(3, 2) with S(3, 2) = 733 child sequences (counted by hand).
                assert_eq!(want.len(), 1466);
            }
            assert_eq!(got, want, "depth {depth}, run {run}, n {n}");
            for t in &got {
                assert!(delinearize(t, &words_n(n)).is_ok());
            }
            // With a length budget: exactly those that fit (EOS counted).
            for max in [n + 2, n + 3, n + 5, n + 8] {
                let got: HashSet<Vec<String>> =
                    accepted(&c, &vocab, n, Some(max)).into_iter().collect();
                let fit: HashSet<Vec<String>> =
                    want.iter().filter(|t| t.len() < max).cloned().collect();
                if fit.is_empty() {
                    // Infeasible budget: ignored.
                    assert_eq!(got, want, "max {max}");
                } else {
                    assert_eq!(got, fit, "depth {depth}, run {run}, n {n}, max {max}");
                }
            }
        }
    }
}

#[test]
fn the_constraint_ends_bad_prefixes_and_degenerate_cases() {
    let vocab = small_vocab();
    let c = ParseConstraint::new(&vocab, EOS);
    let only_eos = |n: usize, prefix: &[u32]| {
        let mut allowed = vec![true; vocab.len() + 2];
        c.restrict(n, prefix, &mut allowed);
        let ids: Vec<usize> = (0..allowed.len()).filter(|&i| allowed[i]).collect();
        ids == [EOS as usize]
    };
    let allowed_after = |n: usize, prefix: &[u32]| {
        let mut allowed = vec![true; vocab.len() + 2];
        c.restrict(n, prefix, &mut allowed);
        (0..allowed.len())
            .filter(|&i| allowed[i])
            .map(|i| vocab.get(i).map_or("?", |t| t.as_str()))
            .collect::<Vec<_>>()
    };
    // Start: a root bracket that can close.
    assert_eq!(allowed_after(2, &[]), ["(A", "(B"]);
    // `(A`: a slot or another bracket; not `)A` (empty), not EOS.
    assert_eq!(allowed_after(2, &[5]), ["XX", "(A", "(B"]);
    // `(A XX` with a word left: the root may not close yet.
    assert_eq!(allowed_after(2, &[5, 4]), ["XX", "(A", "(B"]);
    // `(A XX XX`: no word left, so nothing may open.
    assert_eq!(allowed_after(2, &[5, 4, 4]), [")A"]);
    assert_eq!(allowed_after(2, &[5, 4, 4, 6]), ["</s>"]);
    // Inner bracket closes with words left; the root does not.
    assert_eq!(allowed_after(3, &[5, 7, 4]), ["XX", "(A", "(B", ")B"]);
    // Bad prefixes end at once: a mismatched closer, an unknown token, `(C`, EOS.
    for bad in [&[5, 4, 8][..], &[11], &[9], &[5, 4, 6, 5], &[2], &[99]] {
        assert!(only_eos(1, bad), "{bad:?}");
    }
    assert!(only_eos(1, &[5, 4, 4]));
    // No words: no tree exists.
    assert!(only_eos(0, &[]));
    // A vocabulary without tree tokens: nothing but EOS, never an all-false mask.
    let bare = ParseConstraint::new(&s(&["<pad>", "<s>", "</s>"]), EOS);
    let mut allowed = vec![true; 3];
    bare.restrict(4, &[], &mut allowed);
    assert_eq!(allowed, [false, false, true]);
    // An EOS id past the vocabulary still works.
    let far = ParseConstraint::new(&s(&["XX", "(A", ")A"]), 3);
    let mut allowed = vec![true; 4];
    far.restrict(1, &[1, 0, 2], &mut allowed);
    assert_eq!(allowed, [false, false, false, true]);
    // Entries already false stay false.
    let mut allowed = vec![false; vocab.len()];
    c.restrict(1, &[], &mut allowed);
    assert!(allowed.iter().all(|a| !a));
}

#[test]
fn the_constraint_reads_marked_vocabularies() {
    // SentencePiece-style: word-initial tokens carry `▁`; the bare `(A` is a continuation.
    let vocab = s(&[
        "<pad>", "<s>", "</s>", "<unk>", "▁XX", "▁(A", "▁)A", "(A", ")A", "XX",
    ]);
    let c = ParseConstraint::with_word_marker(&vocab, EOS, "▁");
    let mut allowed = vec![true; vocab.len()];
    c.restrict(1, &[], &mut allowed);
    assert_eq!(allowed.iter().filter(|&&a| a).count(), 1);
    assert!(allowed[5]);
    let mut allowed = vec![true; vocab.len()];
    c.restrict(1, &[5], &mut allowed);
    assert_eq!((0..10).filter(|&i| allowed[i]).collect::<Vec<_>>(), [4, 5]);
    let mut allowed = vec![true; vocab.len()];
    c.restrict(1, &[5, 4], &mut allowed);
    assert_eq!((0..10).filter(|&i| allowed[i]).collect::<Vec<_>>(), [6]);
}

#[test]
fn the_constraint_never_dead_ends_on_random_prefixes_of_allowed_moves() {
    // Random walks with a tiny vocabulary and tight caps, checking after every step that
    // each allowed token still leads to a tree: complete greedily (slot, else close).
    let vocab = small_vocab();
    let mut rng = Rng::new(7);
    for (depth, run) in [(1, 1), (2, 1), (5, 2), (40, 12)] {
        let c = ParseConstraint::new(&vocab, EOS).with_caps(depth, run);
        for _ in 0..60 {
            let n = 1 + rng.below(20);
            let mut prefix = Vec::new();
            loop {
                let mut allowed = vec![true; vocab.len()];
                c.restrict(n, &prefix, &mut allowed);
                let choices: Vec<u32> = (0..vocab.len() as u32)
                    .filter(|&i| allowed[i as usize])
                    .collect();
                for &id in &choices {
                    let mut seq = prefix.clone();
                    seq.push(id);
                    while seq.last() != Some(&EOS) {
                        let mut next = vec![true; vocab.len()];
                        c.restrict(n, &seq, &mut next);
                        let pick = [4u32, 6, 8, EOS]
                            .into_iter()
                            .find(|&i| next[i as usize])
                            .expect("greedy completion");
                        seq.push(pick);
                    }
                    seq.pop();
                    let tokens: Vec<&str> =
                        seq.iter().map(|&i| vocab[i as usize].as_str()).collect();
                    assert!(delinearize(&tokens, &words_n(n)).is_ok(), "{tokens:?}");
                }
                let id = rng.pick(&choices);
                if id == EOS {
                    break;
                }
                prefix.push(id);
            }
        }
    }
}
