//! Parsing end to end (§6.3): `prepare --task parse`, training, constrained decoding and `eval f1`.

use crate::harness::*;
use std::path::Path;

/// Parsing end to end (§6.3) on a few treebank-style trees: `prepare --task parse` reports
/// the malformed tree with its line, a briefly trained model's constrained output is a
/// tree over exactly the input words for every sentence (whatever the model learned), and
/// EVALB-identical scoring reads it without a length mismatch.
#[test]
fn parse_prepare_train_decode_and_score() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let trees = [
        "( (S (NP-SBJ (DT The) (NN dog)) (VP (VBZ barks)) (. .)) )",
        "( (S (NP-SBJ (NNP Mary)) (VP (VBD saw) (NP (DT a) (NN cat))) (. .)) )",
        "( (S (NP-SBJ-1 (DT The) (JJ big) (NN cat)) (VP (VBD slept) (-NONE- *-1)) (. .)) )",
        "( (S (NP-SBJ (PRP He)) (VP (VBZ runs) (PP (IN in) (NP (DT the) (NN park)))) (. .)) )",
    ];
    let mut text = String::new();
    for _ in 0..8 {
        for t in trees {
            text.push_str(t);
            text.push('\n');
        }
    }
    let train = dir.join("train.trees");
    std::fs::write(&train, format!("{text}(S (NP (DT a) (NN b)\n")).unwrap();
    let gold = dir.join("gold.trees");
    std::fs::write(&gold, trees.join("\n") + "\n").unwrap();
    let data = dir.join("data");
    let out = run(&[
        "prepare",
        "--task",
        "parse",
        "--trees",
        s(&train),
        "--valid-trees",
        s(&gold),
        "--vocab-size",
        "40",
        "--out",
        s(&data),
    ]);
    assert!(out.contains("skipped 1 malformed"), "{out}");
    assert!(out.contains("train.trees: line 33"), "{out}");

    // A tiny model trained briefly on a prepared folder, with `extra` flags.
    let train_tiny = |data: &Path, out: &Path, extra: &[&str]| {
        let mut args = vec![
            "train",
            "--data",
            s(data),
            "--out",
            s(out),
            "--preset",
            "tiny",
            "--max-tokens",
            "400",
            "--warmup",
            "20",
            "--max-steps",
            "30",
            "--quiet",
        ];
        args.extend(extra);
        run(&args);
    };
    let run_dir = dir.join("run");
    train_tiny(&data, &run_dir, &[]);
    let input = dir.join("input.txt");
    std::fs::write(
        &input,
        "The dog barks .\nMary saw a big dog in the park .\nHe runs\n",
    )
    .unwrap();
    let parsed = dir.join("parsed.txt");
    run(&[
        "parse",
        "--model",
        s(&run_dir),
        "--input",
        s(&input),
        "--output",
        s(&parsed),
        "--beam",
        "3",
        "--quiet",
    ]);
    let out = std::fs::read_to_string(&parsed).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3);
    for (line, words) in lines
        .iter()
        .zip(std::fs::read_to_string(&input).unwrap().lines())
    {
        let tree = &transduce::task::parse::parse_trees(line).unwrap()[0];
        assert_eq!(tree.words().join(" "), words, "{line}");
    }

    // Gold trees as input: words and tags are taken from them, so EVALB sees no mismatch.
    let test = dir.join("test.trees");
    run(&[
        "parse",
        "--model",
        s(&run_dir),
        "--input",
        s(&gold),
        "--output",
        s(&test),
        "--quiet",
    ]);
    let report = run(&["eval", "f1", "--gold", s(&gold), "--test", s(&test)]);
    assert!(
        report.contains("Number of Error sentence  =      0"),
        "{report}"
    );
    assert!(
        report.contains("Tagging accuracy          = 100.00"),
        "{report}"
    );

    // Word focus (beyond the paper): the flag reaches the bundle's config, and its output,
    // with and without the constraint, is still a tree over the input words.
    let focus_dir = dir.join("focus");
    train_tiny(&data, &focus_dir, &["--word-focus"]);
    let run_json = std::fs::read_to_string(focus_dir.join("run.json")).unwrap();
    assert!(run_json.contains("\"word_focus\": true"), "{run_json}");
    for extra in [None, Some("--no-constraint")] {
        let mut args = vec![
            "parse",
            "--model",
            s(&focus_dir),
            "--input",
            s(&gold),
            "--output",
            s(&test),
            "--quiet",
        ];
        args.extend(extra);
        run(&args);
        let report = run(&["eval", "f1", "--gold", s(&gold), "--test", s(&test)]);
        assert!(
            report.contains("Number of Valid sentence  =      4"),
            "{extra:?}: {report}"
        );
    }

    // An ensemble of a plain and a word-focus model: each member gets what it needs, and
    // the output is still a tree over the input words.
    let ensemble_trees = dir.join("ensemble.trees");
    run(&[
        "parse",
        "--model",
        s(&run_dir),
        "--model",
        s(&focus_dir),
        "--input",
        s(&gold),
        "--output",
        s(&ensemble_trees),
        "--quiet",
    ]);
    let report = run(&[
        "eval",
        "f1",
        "--gold",
        s(&gold),
        "--test",
        s(&ensemble_trees),
    ]);
    assert!(
        report.contains("Number of Valid sentence  =      4"),
        "{report}"
    );
    // Data prepared with the tokenizer of an earlier run (here: other trees, one of them
    // with a label that run has no token for) trains a model that ensembles with it.
    let more = dir.join("more.trees");
    std::fs::write(
        &more,
        format!("{text}(S (UCP (NN a) (CC and) (JJ b)) (VP (VBZ runs)))\n"),
    )
    .unwrap();
    let reuse_data = dir.join("reuse-data");
    let out = run(&[
        "prepare",
        "--task",
        "parse",
        "--trees",
        s(&more),
        "--tokenizer",
        s(&run_dir),
        "--out",
        s(&reuse_data),
    ]);
    assert!(out.contains("no token for (UCP )UCP"), "{out}");
    assert!(
        out.contains("1 with labels outside the vocabulary"),
        "{out}"
    );
    assert_eq!(
        std::fs::read(reuse_data.join("tokenizer.json")).unwrap(),
        std::fs::read(data.join("tokenizer.json")).unwrap()
    );
    let reuse_run = dir.join("reuse-run");
    train_tiny(&reuse_data, &reuse_run, &[]);
    run(&[
        "parse",
        "--model",
        s(&run_dir),
        "--model",
        s(&reuse_run),
        "--input",
        s(&gold),
        "--output",
        s(&ensemble_trees),
        "--quiet",
    ]);
    assert_eq!(
        std::fs::read_to_string(&ensemble_trees)
            .unwrap()
            .lines()
            .count(),
        4
    );
    let e = fail(&[
        "prepare",
        "--task",
        "parse",
        "--trees",
        s(&more),
        "--tokenizer",
        s(&dir.join("nowhere")),
        "--out",
        s(&reuse_data),
    ]);
    assert!(e.contains("nowhere"), "{e}");
    let e = fail(&[
        "prepare",
        "--task",
        "parse",
        "--trees",
        s(&more),
        "--tokenizer",
        s(&run_dir),
        "--vocab-size",
        "50",
        "--out",
        s(&reuse_data),
    ]);
    assert!(e.contains("cannot be used with"), "{e}");

    // Members with different vocabularies cannot decode as one ensemble: one error naming
    // both. Voting needs no shared vocabulary, but a translator is refused there too.
    let translator = transduce_testing::repo_root().join("web/models/en-de");
    for (combine, why) in [
        ("mean", "must share one tokenizer"),
        ("vote", "task Translate"),
    ] {
        let e = fail(&[
            "parse",
            "--model",
            s(&run_dir),
            "--model",
            s(&translator),
            "--combine",
            combine,
            "--input",
            s(&gold),
        ]);
        assert!(e.contains(s(&translator)) && e.contains(why), "{e}");
    }

    // Voting (`--combine vote`): three copies of one model give that model's trees back,
    // and parsers with different vocabularies, which cannot decode as one ensemble, vote.
    let parse_to = |models: &[&Path], extra: &[&str], out: &Path| {
        let mut args = vec!["parse"];
        for m in models {
            args.extend(["--model", s(m)]);
        }
        args.extend(["--input", s(&gold), "--output", s(out), "--quiet"]);
        args.extend(extra);
        run(&args);
        std::fs::read_to_string(out).unwrap()
    };
    let single = parse_to(&[&run_dir], &[], &dir.join("single.trees"));
    let voted = parse_to(
        &[&run_dir, &run_dir, &run_dir],
        &["--combine", "vote"],
        &dir.join("voted.trees"),
    );
    assert_eq!(voted, single);
    let other_data = dir.join("other-data");
    run(&[
        "prepare",
        "--task",
        "parse",
        "--trees",
        s(&train),
        "--vocab-size",
        "48",
        "--out",
        s(&other_data),
    ]);
    let other_run = dir.join("other-run");
    train_tiny(&other_data, &other_run, &[]);
    let e = fail(&[
        "parse",
        "--model",
        s(&run_dir),
        "--model",
        s(&other_run),
        "--input",
        s(&gold),
    ]);
    assert!(e.contains("or let them vote (`--combine vote`)"), "{e}");
    let voted_trees = dir.join("voted.trees");
    parse_to(
        &[&run_dir, &other_run, &focus_dir],
        &["--combine", "vote"],
        &voted_trees,
    );
    let report = run(&["eval", "f1", "--gold", s(&gold), "--test", s(&voted_trees)]);
    assert!(
        report.contains("Number of Valid sentence  =      4"),
        "{report}"
    );

    // `eval ppl --trees` linearizes and encodes the trees as `prepare` does, with the
    // focus rule of the model: it gives the perplexity the trainer recorded for its last
    // step on the same (validation) trees.
    let metrics = std::fs::read_to_string(focus_dir.join("metrics.jsonl")).unwrap();
    let recorded = metrics
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["valid_ppl"].as_f64())
        .next_back()
        .expect("the trainer validated at its last step");
    let report = run(&["eval", "ppl", "--model", s(&focus_dir), "--trees", s(&gold)]);
    let scored: f64 = report
        .strip_prefix("perplexity ")
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{report}"));
    assert!(
        (scored - recorded).abs() < 1e-4 * recorded,
        "eval ppl {scored} vs trainer {recorded}"
    );
    assert!(report.contains("4 pairs"), "{report}");
    // A parsing model on plain sentence pairs is refused, not scored as translation.
    let e = fail(&[
        "eval",
        "ppl",
        "--model",
        s(&focus_dir),
        "--src",
        s(&input),
        "--tgt",
        s(&input),
    ]);
    assert!(
        e.contains("is a parsing model: score it on trees (`eval ppl --trees`)"),
        "{e}"
    );

    // The right-branching baseline, scored by the same evaluator.
    let rb = dir.join("rb.trees");
    run(&[
        "parse",
        "--right-branching",
        "--input",
        s(&gold),
        "--output",
        s(&rb),
    ]);
    let report = run(&["eval", "f1", "--gold", s(&gold), "--test", s(&rb)]);
    assert!(
        report.contains("Number of Valid sentence  =      4"),
        "{report}"
    );
}
