//! Linearization, delinearization and repair.

use super::*;

#[test]
fn linearizes_as_vinyals_et_al() {
    let tree = one("(S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))");
    let (words, tokens) = linearize(&tree);
    assert_eq!(words, ["The", "dog", "barks", "."]);
    assert_eq!(
        tokens,
        [
            "(S", "(NP", "XX", "XX", ")NP", "(VP", "XX", ")VP", "XX", ")S"
        ]
    );
    assert_eq!(
        delinearize(&tokens, &words).map(|t| t.to_string()),
        Ok("(S (NP (XX The) (XX dog)) (VP (XX barks)) (XX .))".to_string())
    );
    assert_eq!(
        target_vocabulary([&tree]),
        ["XX", "(NP", ")NP", "(S", ")S", "(VP", ")VP"]
    );
    assert_eq!(TargetToken::classify("(NP"), TargetToken::Open("NP"));
    assert_eq!(TargetToken::classify(")NP"), TargetToken::Close("NP"));
    assert_eq!(TargetToken::classify("XX"), TargetToken::Slot);
    for other in ["(", ")", "", "XXX", "(N P", "((", "</s>", "▁(NP"] {
        assert_eq!(TargetToken::classify(other), TargetToken::Other, "{other}");
    }
}

#[test]
fn delinearize_reports_ill_formed_sequences() {
    let words = ["a", "b"];
    let cases: Vec<(&str, LinearError)> = vec![
        ("", LinearError::Empty),
        (
            "(S XX <unk> XX )S",
            LinearError::UnknownToken {
                position: 2,
                token: "<unk>".into(),
            },
        ),
        (
            "XX (S XX )S",
            LinearError::SlotOutsideBracket { position: 0 },
        ),
        (
            ")S (S XX XX )S",
            LinearError::StrayClose {
                position: 0,
                token: ")S".into(),
            },
        ),
        (
            "(S (NP XX XX )VP )S",
            LinearError::Mismatch {
                position: 4,
                open: "NP".into(),
                close: "VP".into(),
            },
        ),
        (
            "(S (NP )NP XX XX )S",
            LinearError::EmptyConstituent {
                position: 2,
                label: "NP".into(),
            },
        ),
        (
            "(S (NP XX XX )NP",
            LinearError::Unclosed {
                label: "S".into(),
                open: 1,
            },
        ),
        (
            "(S (VP (NP XX XX",
            LinearError::Unclosed {
                label: "NP".into(),
                open: 3,
            },
        ),
        (
            "(S XX )S (S XX )S",
            LinearError::AfterRoot {
                position: 3,
                token: "(S".into(),
            },
        ),
        (
            "(S XX XX )S </s>",
            LinearError::AfterRoot {
                position: 4,
                token: "</s>".into(),
            },
        ),
        ("(S XX )S", LinearError::WordCount { slots: 1, words: 2 }),
        (
            "(S XX XX XX )S",
            LinearError::WordCount { slots: 3, words: 2 },
        ),
    ];
    for (text, want) in cases {
        let tokens: Vec<&str> = text.split_whitespace().collect();
        let got = delinearize(&tokens, &words);
        assert_eq!(got, Err(want.clone()), "{text}");
        assert!(!want.to_string().is_empty());
    }
    assert_eq!(
        LinearError::Mismatch {
            position: 4,
            open: "NP".into(),
            close: "VP".into()
        }
        .to_string(),
        "token 4 `)VP` closes `(NP`"
    );
}

#[test]
fn repair_makes_a_tree_of_anything() {
    let words = ["a", "b", "c"];
    let fixed = |text: &str| {
        let tokens: Vec<&str> = text.split_whitespace().collect();
        repair(&tokens, &words).to_string()
    };
    // Unclosed brackets closed; missing words added to the innermost open bracket.
    assert_eq!(fixed("(S (NP XX"), "(S (NP (XX a) (XX b) (XX c)))");
    // A closer of an outer bracket closes the inner ones; unmatched closers dropped.
    assert_eq!(
        fixed("(S (VP XX (NP XX )VP )PP XX )S"),
        "(S (VP (XX a) (NP (XX b))) (XX c))"
    );
    // Extra slots and junk dropped; empty constituents dropped.
    assert_eq!(
        fixed("(S <unk> (NP )NP XX XX XX XX XX )S"),
        "(S (XX a) (XX b) (XX c))"
    );
    // Several roots: wrapped in TOP; leftover words join the last root.
    assert_eq!(
        fixed("(S XX )S (S XX )S"),
        "(TOP (S (XX a)) (S (XX b) (XX c)))"
    );
    assert_eq!(fixed("XX XX XX"), "(TOP (XX a) (XX b) (XX c))");
    assert_eq!(fixed(""), "(TOP (XX a) (XX b) (XX c))");
    assert_eq!(fixed(")S )S"), "(TOP (XX a) (XX b) (XX c))");
    assert_eq!(fixed("(S XX )S XX"), "(TOP (S (XX a)) (XX b) (XX c))");
    let empty: [&str; 0] = [];
    assert_eq!(repair(&["(S", "XX", ")S"], &empty), p(TOP, vec![]));

    // Random token soup: always the words, in order, in a tree EVALB can read.
    let mut rng = Rng::new(99);
    let pool = [
        "(S", ")S", "(NP", ")NP", "(VP", ")VP", "XX", "XX", "XX", "<unk>", "(", ")",
    ];
    for _ in 0..2000 {
        let n = 1 + rng.below(12);
        let tokens: Vec<&str> = (0..rng.below(30)).map(|_| rng.pick(&pool)).collect();
        let ws = words_n(n);
        let tree = repair(&tokens, &ws);
        assert_eq!(tree.words(), ws);
        assert!(matches!(tree, Tree::Phrase { .. }));
        let (lw, lt) = linearize(&tree);
        assert_eq!(delinearize(&lt, &lw), Ok(tree.clone()));
        assert_eq!(
            parse_trees(&print_tree(&tree, true)).map(|t| t.len()),
            Ok(1)
        );
        if let Ok(strict) = delinearize(&tokens, &ws) {
            assert_eq!(strict, tree);
        }
    }
}
