//! Reproduces every case of the sacreBLEU 2.6.0 test vectors
//! (`<workspace>/../shared/testvectors/sacrebleu-2.6.0.json`): all `bleu` entries (corpus
//! and sentence BLEU under the recorded options) and all `tokenizer` entries (13a, intl).
//! If the file is absent the test prints a `SKIP: ` line and passes.

use serde_json::Value;
use transduce_metrics::bleu::{
    BleuOptions, SmoothMethod, Tokenizer, corpus_bleu, corpus_bleu_streams, sentence_bleu,
    tokenize_13a, tokenize_intl,
};

fn vectors() -> Option<Value> {
    let path = transduce_testing::repo_root().join("../shared/testvectors/sacrebleu-2.6.0.json");
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(serde_json::from_str(&text).expect("test vector file is valid JSON")),
        Err(e) => {
            transduce_testing::skip(format_args!(
                "sacreBLEU test vectors not found at {} ({e})",
                path.display()
            ));
            None
        }
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("array of strings")
        .iter()
        .map(|s| s.as_str().expect("string").to_owned())
        .collect()
}

fn usizes(v: &Value) -> [usize; 4] {
    let a: Vec<usize> = v
        .as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_u64().expect("integer") as usize)
        .collect();
    a.try_into().expect("4 values")
}

fn options(v: &Value) -> BleuOptions {
    let mut o = BleuOptions::default();
    for (key, value) in v.as_object().expect("options object") {
        match key.as_str() {
            "lowercase" => o.lowercase = value.as_bool().unwrap(),
            "tokenize" => o.tokenize = value.as_str().unwrap().parse::<Tokenizer>().unwrap(),
            "smooth_method" => {
                o.smooth_method = value.as_str().unwrap().parse::<SmoothMethod>().unwrap()
            }
            "smooth_value" => o.smooth_value = value.as_f64(),
            "effective_order" => o.effective_order = Some(value.as_bool().unwrap()),
            other => panic!("unknown option {other:?}"),
        }
    }
    o
}

#[test]
fn bleu_vectors() {
    let Some(v) = vectors() else { return };
    let cases = v["bleu"].as_array().expect("bleu list");
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    let mut max_score_diff = 0.0f64;
    let mut max_detail_diff = 0.0f64;
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let opts = options(&case["options"]);
        let hyps = strings(&case["hyps"]);
        let refs = strings(&case["refs"]);
        assert_eq!(hyps.len(), refs.len(), "{name}: vector hyps/refs lengths");
        let got = match case["kind"].as_str().unwrap() {
            "corpus" => {
                let s = corpus_bleu_streams(&hyps, &[&refs], &opts).unwrap();
                // The per-hypothesis layout must agree.
                let per_hyp: Vec<Vec<String>> = refs.iter().map(|r| vec![r.clone()]).collect();
                assert_eq!(corpus_bleu(&hyps, &per_hyp, &opts).unwrap(), s, "{name}");
                s
            }
            "sentence" => {
                assert_eq!(hyps.len(), 1, "{name}");
                sentence_bleu(&hyps[0], &refs, &opts).unwrap()
            }
            k => panic!("{name}: unknown kind {k}"),
        };

        let mut errs = Vec::new();
        let score = case["score"].as_f64().unwrap();
        let d = (got.score - score).abs();
        max_score_diff = max_score_diff.max(d);
        if d > 1e-4 {
            errs.push(format!("score {} vs {score}", got.score));
        }
        if got.counts != usizes(&case["counts"]) {
            errs.push(format!("counts {:?} vs {}", got.counts, case["counts"]));
        }
        if got.totals != usizes(&case["totals"]) {
            errs.push(format!("totals {:?} vs {}", got.totals, case["totals"]));
        }
        if got.sys_len as u64 != case["sys_len"].as_u64().unwrap() {
            errs.push(format!("sys_len {} vs {}", got.sys_len, case["sys_len"]));
        }
        if got.ref_len as u64 != case["ref_len"].as_u64().unwrap() {
            errs.push(format!("ref_len {} vs {}", got.ref_len, case["ref_len"]));
        }
        let bp = case["bp"].as_f64().unwrap();
        max_detail_diff = max_detail_diff.max((got.bp - bp).abs());
        if (got.bp - bp).abs() > 1e-9 {
            errs.push(format!("bp {} vs {bp}", got.bp));
        }
        let precisions: Vec<f64> = case["precisions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(precisions.len(), 4, "{name}");
        for (g, e) in got.precisions.iter().zip(&precisions) {
            max_detail_diff = max_detail_diff.max((g - e).abs());
            if (g - e).abs() > 1e-9 {
                errs.push(format!("precisions {:?} vs {precisions:?}", got.precisions));
                break;
            }
        }
        let sig = case["signature"].as_str().unwrap();
        if got.signature() != sig {
            errs.push(format!("signature {} vs {sig}", got.signature()));
        }
        if errs.is_empty() {
            println!("ok   {name}: {got}");
        } else {
            failures.push(format!("{name}: {}", errs.join("; ")));
        }
    }
    println!(
        "{} of {} BLEU cases match (max |score diff| {max_score_diff:.3e}, max |bp/precision diff| {max_detail_diff:.3e})",
        cases.len() - failures.len(),
        cases.len()
    );
    assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
}

#[test]
fn tokenizer_vectors() {
    let Some(v) = vectors() else { return };
    let cases = v["tokenizer"].as_array().expect("tokenizer list");
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let input = case["input"].as_str().unwrap();
        let want_13a = case["13a"].as_str().unwrap();
        let want_intl = case["intl"].as_str().unwrap();
        let got_13a = tokenize_13a(input);
        if got_13a != want_13a {
            failures.push(format!("#{i} 13a {input:?}: {got_13a:?} vs {want_13a:?}"));
        }
        let got_intl = tokenize_intl(input);
        if got_intl != want_intl {
            failures.push(format!(
                "#{i} intl {input:?}: {got_intl:?} vs {want_intl:?}"
            ));
        }
    }
    println!(
        "{} of {} tokenizer inputs match for both 13a and intl",
        cases.len() - failures.len(),
        cases.len()
    );
    assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
}
