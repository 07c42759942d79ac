//! Reproduces every number of `shared/testvectors/evalb-collins.json` (EVALB run with
//! `COLLINS.prm` on 150 gold / test tree pairs): each per-sentence line, the error messages,
//! the totals line, both summary blocks and EVALB's complete stdout / stderr.

use serde_json::Value;
use transduce_metrics::evalb::{EvalbParams, Report, SentenceStatus, Summary, evaluate};

fn vectors() -> Option<Value> {
    let path = transduce_testing::repo_root().join("../shared/testvectors/evalb-collins.json");
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(serde_json::from_str(&text).expect("valid JSON")),
        Err(_) => {
            transduce_testing::skip(format_args!("{} not found", path.display()));
            None
        }
    }
}

fn u(v: &Value) -> usize {
    v.as_u64().expect("unsigned integer") as usize
}

/// A figure as EVALB printed it (`%.2f`), compared through the same formatting.
fn p2(v: &Value) -> String {
    format!("{:.2}", v.as_f64().expect("number"))
}

fn run(v: &Value) -> Report {
    let cases = v["cases"].as_array().expect("cases");
    let gold: Vec<&str> = cases.iter().map(|c| c["gold"].as_str().unwrap()).collect();
    let test: Vec<&str> = cases.iter().map(|c| c["test"].as_str().unwrap()).collect();
    evaluate(&gold, &test, &EvalbParams::collins()).expect("EVALB run succeeds")
}

#[test]
fn params_are_collins_prm() {
    let Some(v) = vectors() else { return };
    let prm: String = v["params"]
        .as_array()
        .unwrap()
        .iter()
        .map(|kv| format!("{} {}\n", kv[0].as_str().unwrap(), kv[1].as_str().unwrap()))
        .collect();
    assert_eq!(EvalbParams::from_prm(&prm).unwrap(), EvalbParams::collins());

    let e = &v["params_effective"];
    let p = EvalbParams::collins();
    assert_eq!(p.max_error, e["MAX_ERROR"].as_i64());
    assert_eq!(Some(p.cutoff_len), e["CUTOFF_LEN"].as_i64());
    assert_eq!(p.labeled, e["LABELED"].as_i64() == Some(1));
    let strs = |x: &Value| -> Vec<String> {
        x.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(p.delete_labels, strs(&e["DELETE_LABEL"]));
    assert_eq!(
        p.delete_labels_for_length,
        strs(&e["DELETE_LABEL_FOR_LENGTH"])
    );
    assert_eq!(p.quote_labels, strs(&e["QUOTE_LABEL"]));
    let pairs = |x: &Value| -> Vec<(String, String)> {
        x.as_array()
            .unwrap()
            .iter()
            .map(|q| {
                let q = strs(q);
                (q[0].clone(), q[1].clone())
            })
            .collect()
    };
    assert_eq!(p.eq_labels, pairs(&e["EQ_LABEL"]));
    assert_eq!(p.eq_words, pairs(&e["EQ_WORD"]));
}

#[test]
fn every_sentence_matches() {
    let Some(v) = vectors() else { return };
    let report = run(&v);
    let cases = v["cases"].as_array().unwrap();
    assert_eq!(report.sentences.len(), cases.len());
    let mut failures = Vec::new();
    for (c, r) in cases.iter().zip(&report.sentences) {
        let e = &c["evalb"];
        let status = match r.status {
            SentenceStatus::Ok => 0,
            SentenceStatus::Error => 1,
            SentenceStatus::Skip => 2,
        };
        let ours = (
            r.id,
            r.length,
            status,
            r.matched,
            r.gold_brackets,
            r.test_brackets,
            r.cross_brackets,
            r.words,
            r.correct_tags,
            format!("{:.2}", r.recall()),
            format!("{:.2}", r.precision()),
            format!("{:.2}", r.tag_accuracy()),
        );
        let theirs = (
            u(&e["id"]),
            u(&e["length"]),
            u(&e["status"]),
            u(&e["matched"]),
            u(&e["gold_brackets"]),
            u(&e["test_brackets"]),
            u(&e["cross_brackets"]),
            u(&e["words"]),
            u(&e["correct_tags"]),
            p2(&e["recall"]),
            p2(&e["precision"]),
            p2(&e["tag_accuracy"]),
        );
        let errors: Vec<String> = r
            .errors
            .iter()
            .map(|m| format!("{} : {}", r.id, m))
            .collect();
        let expected_errors: Vec<String> = c["evalb_errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect();
        if ours != theirs
            || r.to_evalb_line() != e["line"].as_str().unwrap()
            || errors != expected_errors
        {
            failures.push(format!(
                "case {} ({}): ours {:?} / {:?} / {:?}, EVALB {:?} / {:?} / {:?}",
                c["id"],
                c["kind"],
                ours,
                r.to_evalb_line(),
                errors,
                theirs,
                e["line"].as_str().unwrap(),
                expected_errors
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

fn check_counts(s: &Summary, d: &Value) {
    let ours = [
        s.sentences,
        s.error_sentences,
        s.skip_sentences,
        s.valid_sentences,
        s.matched,
        s.gold_brackets,
        s.test_brackets,
        s.cross_brackets,
        s.words,
        s.correct_tags,
        s.complete_match_sentences,
        s.no_crossing_sentences,
        s.two_or_less_crossing_sentences,
    ];
    let keys = [
        "sentences",
        "error_sentences",
        "skip_sentences",
        "valid_sentences",
        "matched",
        "gold_brackets",
        "test_brackets",
        "cross_brackets",
        "words",
        "correct_tags",
        "complete_match_sentences",
        "no_crossing_sentences",
        "two_or_less_crossing_sentences",
    ];
    for (k, o) in keys.iter().zip(ours) {
        assert_eq!(o, u(&d[*k]), "derived count {k}");
    }
}

fn check_figures(s: &Summary, d: &Value) {
    assert_eq!(s.sentences, u(&d["sentences"]));
    assert_eq!(s.error_sentences, u(&d["error_sentences"]));
    assert_eq!(s.skip_sentences, u(&d["skip_sentences"]));
    assert_eq!(s.valid_sentences, u(&d["valid_sentences"]));
    let figures = [
        ("bracketing_recall", s.bracketing_recall()),
        ("bracketing_precision", s.bracketing_precision()),
        ("bracketing_fmeasure", s.bracketing_fmeasure()),
        ("complete_match", s.complete_match()),
        ("average_crossing", s.average_crossing()),
        ("no_crossing", s.no_crossing()),
        ("two_or_less_crossing", s.two_or_less_crossing()),
        ("tagging_accuracy", s.tagging_accuracy()),
    ];
    for (k, x) in figures {
        assert_eq!(format!("{x:.2}"), p2(&d[k]), "summary figure {k}");
    }
}

#[test]
fn summaries_match() {
    let Some(v) = vectors() else { return };
    let report = run(&v);
    assert_eq!(report.cutoff_len, 40);
    check_figures(&report.summary_all, &v["summary"]["all"]);
    check_figures(&report.summary_len40, &v["summary"]["len<=40"]);
    check_counts(&report.summary_all, &v["derived_counts"]["all"]);
    check_counts(&report.summary_len40, &v["derived_counts"]["len<=40"]);

    let t = &v["totals"];
    let s = &report.summary_all;
    assert_eq!(s.matched, u(&t["matched"]));
    assert_eq!(s.gold_brackets, u(&t["gold_brackets"]));
    assert_eq!(s.test_brackets, u(&t["test_brackets"]));
    assert_eq!(s.cross_brackets, u(&t["cross_brackets"]));
    assert_eq!(s.words, u(&t["words"]));
    assert_eq!(s.correct_tags, u(&t["correct_tags"]));
    assert_eq!(format!("{:.2}", s.bracketing_recall()), p2(&t["recall"]));
    assert_eq!(
        format!("{:.2}", s.bracketing_precision()),
        p2(&t["precision"])
    );
    assert_eq!(
        format!("{:.2}", s.tagging_accuracy()),
        p2(&t["tag_accuracy"])
    );
    assert_eq!(s.to_evalb_totals_line(), t["line"].as_str().unwrap());
}

#[test]
fn full_output_is_evalb_verbatim() {
    let Some(v) = vectors() else { return };
    let report = run(&v);
    assert_eq!(report.to_evalb_text(), v["evalb_stdout"].as_str().unwrap());
    let stderr: String = report
        .stderr_lines()
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(stderr, v["evalb_stderr"].as_str().unwrap());
}
