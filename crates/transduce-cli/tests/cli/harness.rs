//! What every CLI test uses: the binary, running it, and a toy corpus.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A file or folder of the Marian (OPUS-MT) fixtures, `tests/fixtures/marian/NAME`.
pub fn marian_fixture(name: &str) -> PathBuf {
    transduce_testing::repo_root()
        .join("tests/fixtures/marian")
        .join(name)
}

pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_transduce"));
    c.env("RUST_BACKTRACE", "1");
    c
}

pub fn run(args: &[&str]) -> String {
    let out = bin().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "transduce {args:?} failed:\n{stderr}");
    String::from_utf8(out.stdout).unwrap() + &stderr
}

pub fn fail(args: &[&str]) -> String {
    let out = bin().args(args).output().unwrap();
    assert!(!out.status.success(), "transduce {args:?} should fail");
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// A toy "translation" corpus: the target spells the source's numbers as words.
pub fn corpus(dir: &Path) -> (PathBuf, PathBuf) {
    let words = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
    ];
    let mut src = String::new();
    let mut tgt = String::new();
    let mut x: u64 = 7;
    for _ in 0..300 {
        let n = 2 + (x % 5) as usize;
        let mut s = Vec::new();
        let mut t = Vec::new();
        for _ in 0..n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let d = ((x >> 33) % 10) as usize;
            s.push(d.to_string());
            t.push(words[d]);
        }
        src.push_str(&s.join(" "));
        src.push('\n');
        tgt.push_str(&t.join(" "));
        tgt.push('\n');
    }
    let (s, t) = (dir.join("train.src"), dir.join("train.tgt"));
    std::fs::write(&s, src).unwrap();
    std::fs::write(&t, tgt).unwrap();
    (s, t)
}

/// `transduce translate --model MODEL --input INPUT --output OUT --quiet FLAGS…`; the output.
pub fn translate_file(model: &Path, input: &Path, out: &Path, flags: &[&str]) -> String {
    let mut args = vec![
        "translate",
        "--model",
        s(model),
        "--input",
        s(input),
        "--output",
        s(out),
        "--quiet",
    ];
    args.extend_from_slice(flags);
    run(&args);
    std::fs::read_to_string(out).unwrap()
}

/// `transduce score --model MODEL --src SRC --tgt TGT [--nbest]`'s arguments.
pub fn score_args<'a>(model: &'a Path, src: &'a Path, tgt: &'a Path, nbest: bool) -> Vec<&'a str> {
    let mut args = vec![
        "score",
        "--model",
        s(model),
        "--src",
        s(src),
        "--tgt",
        s(tgt),
    ];
    args.extend(nbest.then_some("--nbest"));
    args
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The toy corpus in `dir`, prepared (validating on its first 40 training pairs: every
/// training run here validates, and on lavapipe all 300 took a fifth of a short run):
/// source, target, prepared folder.
pub fn prepare_toy(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let (src, tgt) = corpus(dir);
    let (valid_src, valid_tgt) = (dir.join("valid.src"), dir.join("valid.tgt"));
    for (from, to) in [(&src, &valid_src), (&tgt, &valid_tgt)] {
        let text = std::fs::read_to_string(from).unwrap();
        let head: String = text.lines().take(40).map(|l| format!("{l}\n")).collect();
        std::fs::write(to, head).unwrap();
    }
    let data = dir.join("data");
    let out = run(&[
        "prepare",
        "--src",
        s(&src),
        "--tgt",
        s(&tgt),
        "--valid-src",
        s(&valid_src),
        "--valid-tgt",
        s(&valid_tgt),
        "--vocab-size",
        "60",
        "--out",
        s(&data),
    ]);
    assert!(out.contains("kept 300 training and 40 validation"), "{out}");
    (src, tgt, data)
}
