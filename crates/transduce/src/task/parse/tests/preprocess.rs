//! Preprocessing.

use super::*;

#[test]
fn function_tags_and_indices_are_stripped_from_phrase_labels() {
    for (label, want) in [
        ("NP-SBJ-1", "NP"),
        ("NP=2", "NP"),
        ("PP-LOC-CLR", "PP"),
        ("NP-SBJ=1-3", "NP"),
        ("S-TPC-1", "S"),
        ("WHNP-260", "WHNP"),
        ("ADVP|PRT", "ADVP|PRT"),
        ("NP", "NP"),
        ("-NONE-", "-NONE-"),
        ("-LRB-", "-LRB-"),
        ("=", "="),
        ("", ""),
    ] {
        assert_eq!(strip_function_tags(label), want, "{label}");
    }
}

#[test]
fn preprocessing_removes_empty_elements_tags_and_the_outer_bracket() {
    let raw = one("( (S (S-TPC-2 (NP-SBJ (NNS Prices)) (VP (VBD fell))) (, ,)
              (NP-SBJ=1 (-LRB- -LRB-) (NNS analysts) (-RRB- -RRB-))
              (VP (VBD said) (SBAR (-NONE- 0) (S (-NONE- *T*-2)))) (. .)) )");
    let want = one("(S (S (NP (NNS Prices)) (VP (VBD fell))) (, ,)
            (NP (-LRB- -LRB-) (NNS analysts) (-RRB- -RRB-)) (VP (VBD said)) (. .))");
    assert_eq!(preprocess(&raw), Some(want.clone()));
    assert_eq!(preprocess(&want), Some(want.clone()));
    let (words, tokens) = linearize(&want);
    assert_eq!(
        words,
        [
            "Prices", "fell", ",", "-LRB-", "analysts", "-RRB-", "said", "."
        ]
    );
    assert_eq!(
        tokens.join(" "),
        "(S (S (NP XX )NP (VP XX )VP )S XX (NP XX XX XX )NP (VP XX )VP XX )S"
    );
    // Several constituents, or a lone preterminal, under the outer bracket: a TOP root.
    assert_eq!(
        preprocess(&one("( (NP (NN a)) (. .) )")),
        Some(p(TOP, vec![p("NP", vec![w("NN", "a")]), w(".", ".")]))
    );
    assert_eq!(
        preprocess(&one("( (UH Yes) )")),
        Some(p(TOP, vec![w("UH", "Yes")]))
    );
    assert_eq!(
        preprocess(&w("UH", "Yes")),
        Some(p(TOP, vec![w("UH", "Yes")]))
    );
    // Outer bracket gone after -NONE- removal leaves one constituent.
    assert_eq!(
        preprocess(&one("( (S (NP (-NONE- *)) (VP (VB go))) (-NONE- *U*) )")),
        Some(one("(S (VP (VB go)))"))
    );
    // Nothing but empty elements.
    assert_eq!(
        preprocess(&one("( (S (NP (-NONE- *)) (-NONE- *T*)) )")),
        None
    );
}
