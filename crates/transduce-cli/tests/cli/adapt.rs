//! `transduce adapt`: fine-tuning a shipped translator on the user's pairs.

use crate::harness::*;
use std::path::Path;

/// `transduce adapt` teaches the shipped de-en a term it gets wrong (tests/fixtures/adapt:
/// "Wien", which it renders "guy", "the woods", …): after 30 steps on 40 pairs, at least 80%
/// of 25 unseen sentences naming Wien say Vienna, where none did (24 of 25 measured on
/// AVX-512: the bar leaves room for other CPUs' rounding; a broken adaptation stays at 0). The same seed gives the
/// same weights; the bundle records its adaptation and keeps the shipped int8 storage; the
/// adapted bundle adapts again. Every bad input is one error naming the file and line, and
/// leaves no output.
#[test]
fn adapt_teaches_a_term_and_refuses_bad_pairs() {
    let repo = transduce_testing::repo_root();
    let model = repo.join("web/models/de-en");
    let fixtures = repo.join("tests/fixtures/adapt");
    let tmp = tempfile::tempdir().unwrap();
    let test: Vec<(String, String)> = std::fs::read_to_string(fixtures.join("wien.test.tsv"))
        .unwrap()
        .lines()
        .map(|l| {
            let (de, en) = l.split_once('\t').unwrap();
            (de.to_string(), en.to_string())
        })
        .collect();
    let input = tmp.path().join("test.de");
    std::fs::write(
        &input,
        test.iter()
            .map(|(de, _)| format!("{de}\n"))
            .collect::<String>(),
    )
    .unwrap();
    let vienna = |bundle: &Path| {
        let out = translate_file(bundle, &input, &tmp.path().join("out.en"), &[]);
        out.lines().filter(|l| l.contains("Vienna")).count()
    };
    assert_eq!(vienna(&model), 0, "the shipped model already knows Vienna");

    let pairs = fixtures.join("wien.pairs.tsv");
    let adapted = tmp.path().join("adapted");
    let log = run(&[
        "adapt",
        "--model",
        s(&model),
        "--pairs",
        s(&pairs),
        "--out",
        s(&adapted),
    ]);
    assert!(log.contains("on 40 pairs with 512 general pairs"), "{log}");
    assert!(log.contains("step 30/30"), "{log}");
    let hits = vienna(&adapted);
    assert!(
        hits * 10 >= test.len() * 8,
        "{hits} of {} say Vienna",
        test.len()
    );
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(adapted.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["weights"], "int8");
    assert_eq!(config["adaptation"]["pairs"], 40);
    assert_eq!(config["adaptation"]["steps"], 30);
    assert_eq!(
        config["adaptation"]["from_sha256"],
        transduce::bundle::sha256_hex(&std::fs::read(model.join("model.safetensors")).unwrap())
    );
    assert!(adapted.join("replay.tsv").exists());

    // Deterministic: the same pairs and seed give the same weights, bit for bit.
    let again = tmp.path().join("again");
    run(&[
        "adapt",
        "--model",
        s(&model),
        "--pairs",
        s(&pairs),
        "--out",
        s(&again),
    ]);
    assert_eq!(
        std::fs::read(adapted.join("model.safetensors")).unwrap(),
        std::fs::read(again.join("model.safetensors")).unwrap()
    );
    // An adapted bundle adapts again: the pairs add up, the origin stays the shipped one.
    let twice = tmp.path().join("twice");
    run(&[
        "adapt",
        "--model",
        s(&adapted),
        "--pairs",
        s(&pairs),
        "--out",
        s(&twice),
        "--steps",
        "2",
    ]);
    let config2: serde_json::Value =
        serde_json::from_slice(&std::fs::read(twice.join("config.json")).unwrap()).unwrap();
    assert_eq!(config2["adaptation"]["pairs"], 80);
    assert_eq!(config2["adaptation"]["steps"], 32);
    assert_eq!(
        config2["adaptation"]["from_sha256"],
        config["adaptation"]["from_sha256"]
    );

    // Bad input: one error naming the file and line; nothing written.
    let bad = tmp.path().join("bad.tsv");
    let long = vec!["Wort"; 600].join(" ");
    let cases: Vec<(Vec<u8>, String)> = vec![
        (
            b"Wo ist Wien?\tWhere is Vienna?\nIch wohne in Wien, I live in Vienna.\n".to_vec(),
            "bad.tsv, line 2: no tab".into(),
        ),
        (
            b"Wo ist Wien?\tWhere\tis Vienna?\n".to_vec(),
            "bad.tsv, line 1: more than one tab".into(),
        ),
        (
            b"Wo ist Wien?\tWhere is Vienna?\n\n\t I live in Vienna.\n".to_vec(),
            "bad.tsv, line 3: the source sentence (before the tab) is empty".into(),
        ),
        (
            b"Wo ist Wien?\t  \n".to_vec(),
            "bad.tsv, line 1: the translation (after the tab) is empty".into(),
        ),
        (
            b"Wo ist Wien?\tWhere is Vienna?\nIch m\xF6chte nach Wien.\tI want to go to Vienna.\n"
                .to_vec(),
            "bad.tsv, line 2: not UTF-8 (byte 0xF6 at column 6)".into(),
        ),
        (b"\n  \n".to_vec(), "bad.tsv: no sentence pairs".into()),
        (
            format!("Wo ist Wien?\tWhere is Vienna?\n{long}\tWords.\n").into_bytes(),
            "bad.tsv, line 2: the source is".into(),
        ),
    ];
    for (i, (bytes, want)) in cases.iter().enumerate() {
        std::fs::write(&bad, bytes).unwrap();
        let out = tmp.path().join(format!("bad{i}"));
        let err = fail(&[
            "adapt",
            "--model",
            s(&model),
            "--pairs",
            s(&bad),
            "--out",
            s(&out),
        ]);
        assert!(
            err.contains(want.as_str()),
            "case {i}: want {want:?} in {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "case {i}: one line: {err}");
        assert!(!out.exists(), "case {i}: {} was written", out.display());
    }
    let parser = fail(&[
        "adapt",
        "--model",
        s(&repo.join("web/models/ptb-parser")),
        "--pairs",
        s(&pairs),
        "--out",
        s(&tmp.path().join("p")),
    ]);
    assert!(parser.contains("adaptation is for translators"), "{parser}");
    let lr = fail(&[
        "adapt",
        "--model",
        s(&model),
        "--pairs",
        s(&pairs),
        "--out",
        s(&tmp.path().join("l")),
        "--lr",
        "2",
    ]);
    assert!(lr.contains("--lr: must be above 0 and below 1"), "{lr}");
}
