//! `transduce eval`: sacreBLEU's line and signature, EVALB's figures, the shipped parser's
//! recorded F1, and quiet ends into closed pipes.

use crate::harness::*;

#[test]
fn eval_bleu_prints_the_sacrebleu_line_and_signature() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let hyp = dir.join("hyp.txt");
    let reference = dir.join("ref.txt");
    std::fs::write(&hyp, "Ein Hund rennt .\nZwei Männer spielen Fußball.\n").unwrap();
    std::fs::write(
        &reference,
        "Ein Hund rennt .\nZwei Männer spielen Fußball.\n",
    )
    .unwrap();
    let out = run(&["eval", "bleu", "--hyp", s(&hyp), "--ref", s(&reference)]);
    assert!(
        out.starts_with("BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0 = 100.00"),
        "{out}"
    );
    std::fs::write(&reference, "Ein Hund rennt .\n").unwrap();
    let e = fail(&["eval", "bleu", "--hyp", s(&hyp), "--ref", s(&reference)]);
    assert!(
        e.contains("hyp.txt has 2 lines") && e.contains("ref.txt has 1"),
        "{e}"
    );
}
#[test]
fn eval_f1_prints_evalb_figures() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let gold = dir.join("gold.txt");
    let test = dir.join("test.txt");
    std::fs::write(&gold, "(S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))\n").unwrap();
    // One wrong bracket out of three: recall 2/3 of (S, NP, VP) after punctuation deletion.
    std::fs::write(&test, "(S (NP (DT The)) (VP (NN dog) (VBZ barks)) (. .))\n").unwrap();
    let out = run(&["eval", "f1", "--gold", s(&gold), "--test", s(&test)]);
    assert!(out.contains("Bracketing Recall"), "{out}");
    assert!(out.contains("Bracketing FMeasure"), "{out}");
}
/// The shipped parser's recorded test score is what it scores: the PTB sample's test trees
/// parsed with the bundle's own decoding settings and scored by `eval f1` give the F1 its
/// `config.json` states (to the printed two decimals).
#[test]
fn shipped_parser_scores_its_recorded_f1() {
    let test_trees = transduce_testing::shared_data().join("ptb-sample/test.trees.gz");
    if !test_trees.exists() {
        transduce_testing::skip(format_args!("{} not found", test_trees.display()));
        return;
    }
    let bundle = transduce_testing::repo_root().join("web/models/ptb-parser");
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("config.json")).unwrap())
            .unwrap();
    let recorded = config["metrics"]["f1_test_constrained"].as_f64().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let gold = tmp.path().join("test.gold");
    let text = {
        use std::io::Read;
        let mut text = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&test_trees).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        text
    };
    std::fs::write(&gold, text).unwrap();
    let parsed = tmp.path().join("test.parsed");
    run(&[
        "parse",
        "--model",
        s(&bundle),
        "--input",
        s(&gold),
        "--output",
        s(&parsed),
        "--quiet",
    ]);
    let report = run(&["eval", "f1", "--gold", s(&gold), "--test", s(&parsed)]);
    let f1: f64 = report
        .lines()
        .find(|l| l.starts_with("Bracketing FMeasure"))
        .and_then(|l| l.split('=').nth(1))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        (f1 - recorded).abs() < 0.005,
        "F1 {f1}, recorded {recorded}"
    );
}
/// Output into a pipe the reader has closed (`transduce eval f1 … | head`) ends the
/// process quietly, as SIGPIPE ends `cat`, instead of a panic and a backtrace.
#[cfg(unix)]
#[test]
fn a_closed_pipe_stops_output_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let tmp = tempfile::tempdir().unwrap();
    let gold = tmp.path().join("gold.trees");
    // Far more report than a pipe buffers (64 KiB), so the writes must meet the closed end.
    let tree = "( (S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .)) )\n";
    std::fs::write(&gold, tree.repeat(5000)).unwrap();
    let mut child = bin()
        .args(["eval", "f1", "--gold", s(&gold), "--test", s(&gold)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.signal(), Some(13), "{:?} {stderr}", out.status);
}
