//! Fuzzed metric readers: the BLEU tokenizers and scorers, and EVALB's tree reader, given
//! arbitrary and mutated text, return a value or an `Err`, never panic; scores stay in
//! range. Counts: `TRANSDUCE_FUZZ_CASES`; the long runs are in docs/FUZZING.md.

use transduce_fuzz::Target;
use transduce_metrics::bleu::{
    BleuOptions, SmoothMethod, Tokenizer, corpus_bleu, sentence_bleu, tokenize_13a, tokenize_intl,
};
use transduce_metrics::evalb::{EvalbParams, evaluate_sentence, evaluate_text};

/// Hypothesis and reference: the input split at its first tab (or the input twice).
fn pair(text: &str) -> (&str, &str) {
    text.split_once('\t').unwrap_or((text, text))
}

#[test]
fn fuzz_bleu() {
    let seeds = [
        "A man in an orange hat starring at something.\tA man with an orange hat looking at something.",
        "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.\tEin Mann mit Hut.",
        "It's $5.00 -- isn't it? (yes) &quot;quoted&quot; &amp; <skipped>\tIt's 5 dollars",
        "1,000.5 3.14 e.g. U.S.A.\u{85}x\u{2028}y\r\n\tThe 1,000.5",
        "犬が走る。「こんにちは」 한국어 ١٢٣ — “quotes” ‘single’\t犬が走る。",
    ];
    let options: Vec<BleuOptions> = [Tokenizer::Tok13a, Tokenizer::Intl, Tokenizer::None]
        .into_iter()
        .flat_map(|tokenize| {
            [
                SmoothMethod::Exp,
                SmoothMethod::Floor,
                SmoothMethod::AddK,
                SmoothMethod::None,
            ]
            .map(|smooth_method| BleuOptions {
                tokenize,
                smooth_method,
                lowercase: smooth_method == SmoothMethod::Floor,
                ..BleuOptions::default()
            })
        })
        .collect();
    Target::new("bleu", seeds.map(str::as_bytes))
        .dictionary(
            [
                "&quot;",
                "&amp;",
                "&lt;",
                "<skipped>",
                "-\n",
                "'s",
                "n't",
                ".",
                ",",
                "$",
                "%",
                "--",
            ]
            .map(str::as_bytes),
        )
        .cases(5_000)
        .run(|input| {
            let text = String::from_utf8_lossy(input);
            let (hyp, reference) = pair(&text);
            for line in [hyp, reference] {
                for tokens in [tokenize_13a(line), tokenize_intl(line)] {
                    assert!(!tokens.contains("  "), "double space in {tokens:?}");
                }
            }
            // One of the twelve settings per input, in turn.
            let options = &options[input.len() % options.len()];
            let mut accepted = false;
            for score in [
                sentence_bleu(hyp, &[reference], options),
                corpus_bleu(&[hyp, reference], &[[reference], [hyp]], options),
            ]
            .into_iter()
            .flatten()
            {
                assert!(
                    (0.0..=100.0 + 1e-9).contains(&score.score),
                    "{}",
                    score.score
                );
                accepted = true;
            }
            accepted
        });
}

#[test]
fn fuzz_evalb() {
    let seeds = [
        "(S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))\t(S (NP (DT The) (NN dog)) (VP (VBZ barks) (. .)))",
        "( (S (NP-SBJ (PRP It)) (VP (VBD rained)) (. .)) )\t(TOP (S (NP (XX It)) (VP (XX rained)) (XX .)))",
        "(S (`` ``) (NP (-NONE- *T*-1)) (ADVP|PRT (RB up)) (, ,) ('' ''))\t(S (XX ``) (XX up) (XX ,) (XX ''))",
    ];
    let params = EvalbParams::collins();
    Target::new("evalb", seeds.map(str::as_bytes))
        .dictionary(
            [
                "(",
                ")",
                "(S ",
                "(NP ",
                "(-NONE- *)",
                "(, ,)",
                "(. .)",
                "TOP",
            ]
            .map(str::as_bytes),
        )
        .cases(20_000)
        .run(|input| {
            let text = String::from_utf8_lossy(input);
            let (gold, test) = pair(&text);
            let sentence = evaluate_sentence(gold, test, &params);
            if let Ok(r) = &sentence {
                for x in [r.recall(), r.precision()] {
                    assert!(x.is_nan() || (0.0..=100.0).contains(&x), "{x}");
                }
            }
            let report = evaluate_text(gold, test, &params);
            if let Ok(report) = &report {
                let _ = report.to_evalb_text();
            }
            sentence.is_ok()
        });
}
