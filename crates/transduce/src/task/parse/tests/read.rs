//! Treebank reading.

use super::*;

#[test]
fn reads_both_openings_and_compact_closings() {
    let want = p(
        "",
        vec![p(
            "S",
            vec![
                p("NP-SBJ", vec![w("DT", "The"), w("NN", "dog")]),
                p("VP", vec![w("VBZ", "barks")]),
                w(".", "."),
            ],
        )],
    );
    for text in [
        "( (S (NP-SBJ (DT The) (NN dog)) (VP (VBZ barks)) (. .)) )",
        "((S (NP-SBJ (DT The)(NN dog))(VP (VBZ barks))(. .)))",
        "( (S \n    (NP-SBJ (DT The) (NN dog) )\n\t(VP (VBZ barks) )\r\n    (. .) ))\n",
    ] {
        assert_eq!(one(text), want, "{text:?}");
    }
    // Several trees, any layout; a bare labelled tree; a bare preterminal.
    let trees = parse_trees("(S (NN a))\n\n  (NN b) ((X (NN c)))\n").unwrap();
    assert_eq!(trees.len(), 3);
    assert_eq!(trees[1], w("NN", "b"));
    assert_eq!(parse_trees(""), Ok(vec![]));
    assert_eq!(parse_trees(" \n\t\n"), Ok(vec![]));
    // Labels and words as written: punctuation, `-LRB-`, non-ASCII.
    let t = one("(NP (-LRB- -LRB-) (`` ``) (NN café) (-NONE- *T*-1) ($ $))");
    assert_eq!(t.tags(), ["-LRB-", "``", "NN", "-NONE-", "$"]);
    assert_eq!(t.words(), ["-LRB-", "``", "café", "*T*-1", "$"]);
}

#[test]
fn malformed_trees_give_errors_with_lines() {
    use TreeErrorKind as K;
    let cases: Vec<(&str, usize, K)> = vec![
        (
            "(S (NN a))\n( (S (NP (NN dog))\n",
            2,
            K::Unclosed {
                next_tree_line: None,
            },
        ),
        (
            "( (S (NN a))\n( (S (NN b)) )\n",
            1,
            K::Unclosed {
                next_tree_line: Some(2),
            },
        ),
        ("(S (NN a))\n\n(S (NN b)))\n", 3, K::StrayClose),
        (")", 1, K::StrayClose),
        ("(S\n  (  (NN dog)))", 2, K::EmptyLabel),
        ("(S ()\n)", 1, K::EmptyLabel),
        ("( dog)", 1, K::MissingTag { word: "dog".into() }),
        (
            "(S (NN a))\nhello world (S (NN b))",
            2,
            K::WordOutsideBracket {
                word: "hello".into(),
            },
        ),
        ("\n\n()", 3, K::EmptyTree),
        ("( )", 1, K::EmptyTree),
        ("(S\n (NP ))", 2, K::EmptyConstituent { label: "NP".into() }),
        (
            "(S (NN big dog))",
            1,
            K::SeveralWords {
                tag: "NN".into(),
                count: 2,
            },
        ),
        (
            "(NP (DT the)\n dog)",
            2,
            K::WordBesideBrackets {
                label: "NP".into(),
                word: "dog".into(),
            },
        ),
    ];
    for (text, line, kind) in cases {
        let e = err(text);
        assert_eq!(e, TreeError { line, kind }, "{text:?}");
        let shown = e.to_string();
        assert!(shown.starts_with(&format!("line {line}: ")), "{shown}");
    }
    assert_eq!(
        err("(S (NP ))").to_string(),
        "line 1: empty constituent `(NP )`"
    );
    assert_eq!(err("x").to_string(), "line 1: word `x` outside any bracket");
    let boxed: Box<dyn std::error::Error> = Box::new(err(")"));
    assert!(boxed.to_string().contains("unbalanced brackets"));
}

#[test]
fn the_lenient_reader_skips_and_reports() {
    let text = "\
( (S (NP (NN a)) (VP (VBZ b))) )
( (S (NP (NN broken)) (VP (VBZ b)) )
( (S (NP (NN c)) (VP (VBZ d))) )
( (S (NP ) (VP (VBZ e))) )
stray words here
( (S (NN f)) ))
(  (NN g))
( (S
(NP (NN h))
(VP (VBZ i))) )
( (S (NP (NN j)
";
    let report = parse_trees_lenient(text);
    let firsts: Vec<&str> = report.trees.iter().map(|t| t.words()[0]).collect();
    assert_eq!(firsts, ["a", "c", "f", "g", "h"]);
    let got: Vec<(usize, String)> = report
        .skipped
        .iter()
        .map(|e| (e.line, e.kind.to_string()))
        .collect();
    let want = [
        (
            2,
            "unbalanced brackets: the tree starting here is not closed before the next tree (line 3)",
        ),
        (4, "empty constituent `(NP )`"),
        (5, "word `stray` outside any bracket"),
        (6, "unbalanced brackets: `)` closes nothing"),
        (
            11,
            "unbalanced brackets: the tree starting here is not closed at the end of the input",
        ),
    ];
    let want: Vec<(usize, String)> = want.iter().map(|(l, m)| (*l, m.to_string())).collect();
    assert_eq!(got, want);
    // The strict reader stops at the first of them.
    assert_eq!(parse_trees(text), Err(report.skipped[0].clone()));
}

#[test]
fn layout_is_free_and_broken_files_are_read_in_one_pass() {
    // A well-formed tree may put its brackets anywhere, first columns included.
    let text = "(S\n(NP (DT the)\n(NN dog))\n(VP (VBZ barks)))\n(S (NN x))";
    assert_eq!(parse_trees(text).map(|t| t.len()), Ok(2));
    // Every line missing its last `)`: each is reported, up to the next line; the
    // reader does not rescan the rest of the input for each (20,000 lines here).
    let lines = 20_000;
    let text = "( (S (NP (NN a)) (VP (VBZ b)))\n".repeat(lines);
    let report = parse_trees_lenient(&text);
    assert!(report.trees.is_empty());
    assert_eq!(report.skipped.len(), lines);
    for (i, e) in report.skipped.iter().enumerate() {
        let next_tree_line = (i + 1 < lines).then_some(i + 2);
        assert_eq!(e.line, i + 1);
        assert_eq!(e.kind, TreeErrorKind::Unclosed { next_tree_line });
    }
    // Every other line broken: the good ones are all kept.
    let text = "( (S (NN a))\n( (S (NN b)) )\n".repeat(lines / 2);
    let report = parse_trees_lenient(&text);
    assert_eq!(report.trees.len(), lines / 2);
    assert_eq!(report.skipped.len(), lines / 2);
}

#[test]
fn nesting_is_capped() {
    let deep = |depth: usize| {
        let mut text = String::new();
        for _ in 0..depth - 1 {
            text.push_str("(A ");
        }
        text.push_str("(NN x)");
        text.push_str(&")".repeat(depth - 1));
        text
    };
    // At the cap everything works (recursive helpers included).
    let tree = one(&deep(MAX_NESTING));
    assert_eq!(tree.depth(), MAX_NESTING - 1);
    let (words, tokens) = linearize(&tree);
    assert_eq!(
        parse_trees(&print_tree(&tree, false)),
        Ok(vec![tree.clone()])
    );
    let back = delinearize(&tokens, &words).unwrap();
    assert_eq!(back, tree.with_placeholder_tags());
    assert_eq!(repair(&tokens, &words), back);
    assert!(preprocess(&tree).is_some());
    // Past it: an error, and the reader goes on after the span.
    let text = format!("{}\n(NN y)", deep(MAX_NESTING + 5));
    let report = parse_trees_lenient(&text);
    assert_eq!(report.trees, [w("NN", "y")]);
    assert_eq!(
        report.skipped[0].kind,
        TreeErrorKind::TooDeep { limit: MAX_NESTING }
    );
    let opens = vec!["(A"; MAX_NESTING + 1];
    assert_eq!(
        delinearize(&opens, &["x"]),
        Err(LinearError::TooDeep {
            position: MAX_NESTING
        })
    );
    let mut tokens = opens.clone();
    tokens.push("XX");
    assert_eq!(repair(&tokens, &["x"]).depth(), MAX_NESTING);
}

#[test]
fn random_input_never_panics_and_what_reads_prints_back() {
    let mut rng = Rng::new(42);
    let pieces = [
        "(",
        ")",
        "((",
        "))",
        ")(",
        " ",
        "\n",
        "\t",
        "(S",
        "(NP",
        "(NN",
        "(-NONE-",
        "x",
        "dog",
        "-LRB-",
        "=",
        "-",
        "é",
        "\r\n",
        "(NP-SBJ-1",
        "()",
        "( (",
    ];
    let mut read_ok = 0;
    for round in 0..3000 {
        let text = match round % 3 {
            // Random bytes.
            0 => {
                let bytes: Vec<u8> = (0..rng.below(60)).map(|_| rng.next() as u8).collect();
                String::from_utf8_lossy(&bytes).into_owned()
            }
            // Bracket soup.
            1 => (0..rng.below(40)).map(|_| rng.pick(&pieces)).collect(),
            // A few printed trees, one per line, then a few random edits.
            _ => {
                let mut text = String::new();
                for _ in 0..1 + rng.below(3) {
                    text.push_str(&print_tree(&random_tree(&mut rng, 4), rng.below(2) == 0));
                    text.push('\n');
                }
                let mut chars: Vec<char> = text.chars().collect();
                for _ in 0..rng.below(3) {
                    let at = rng.below(chars.len());
                    match rng.below(3) {
                        0 => {
                            chars.remove(at);
                        }
                        1 => chars.insert(at, rng.pick(&['(', ')', ' ', '\n', 'x'])),
                        _ => chars.insert(at, '\n'),
                    }
                }
                chars.into_iter().collect()
            }
        };
        let report = parse_trees_lenient(&text);
        let lines = text.matches('\n').count() + 1;
        for e in &report.skipped {
            assert!((1..=lines).contains(&e.line), "{text:?}: {e}");
            assert!(e.to_string().starts_with("line "));
        }
        match parse_trees(&text) {
            Ok(trees) => {
                read_ok += 1;
                assert!(report.skipped.is_empty());
                assert_eq!(trees, report.trees);
                for tree in &trees {
                    assert_eq!(
                        parse_trees(&print_tree(tree, false)),
                        Ok(vec![tree.clone()])
                    );
                    if let Some(clean) = preprocess(tree) {
                        let (words, tokens) = linearize(&clean);
                        assert_eq!(
                            delinearize(&tokens, &words),
                            Ok(clean.with_placeholder_tags())
                        );
                    }
                }
            }
            Err(e) => assert_eq!(Some(&e), report.skipped.first()),
        }
    }
    println!("fuzz: {read_ok} of 3000 inputs read without error");
    assert!(read_ok > 500, "only {read_ok} readable inputs");
}
