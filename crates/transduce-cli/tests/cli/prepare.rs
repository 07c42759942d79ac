//! `transduce prepare`: what it keeps and what it drops, and says so.

use crate::harness::*;

#[test]
fn prepare_reports_dropped_pairs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let a = dir.join("a.en");
    let b = dir.join("b.de");
    let long = "word ".repeat(50);
    std::fs::write(&a, format!("a cat\n\nthe dog\n{long}\nthe cat\n")).unwrap();
    std::fs::write(&b, "eine Katze\nleer\nder Hund\nkurz\ndie Katze\n").unwrap();
    let out = run(&[
        "prepare",
        "--src",
        s(&a),
        "--tgt",
        s(&b),
        "--out",
        s(&dir.join("o")),
        "--vocab-size",
        "50",
        "--max-len",
        "20",
    ]);
    assert!(
        out.contains("dropped 1 empty and 1 longer than 20"),
        "{out}"
    );
    // The same corpus read with that vocabulary (a prepared folder given as --tokenizer)
    // is encoded to the same ids.
    let out = run(&[
        "prepare",
        "--src",
        s(&a),
        "--tgt",
        s(&b),
        "--out",
        s(&dir.join("p")),
        "--tokenizer",
        s(&dir.join("o")),
        "--max-len",
        "20",
    ]);
    assert!(out.contains("using the vocabulary of"), "{out}");
    for file in ["tokenizer.json", "train.bin"] {
        assert_eq!(
            std::fs::read(dir.join("o").join(file)).unwrap(),
            std::fs::read(dir.join("p").join(file)).unwrap(),
            "{file}"
        );
    }
}
