//! Bad input and bad option values: one clear error, before any work.

use crate::harness::*;

#[test]
fn bad_input_gets_one_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Word focus needs the slot token of a parsing vocabulary.
    let (_, _, toy) = prepare_toy(dir);
    let e = fail(&[
        "train",
        "--data",
        s(&toy),
        "--out",
        s(&dir.join("focus-run")),
        "--preset",
        "tiny",
        "--max-steps",
        "1",
        "--word-focus",
    ]);
    assert_eq!(
        e.matches("word focus needs a parsing vocabulary").count(),
        1,
        "{e}"
    );
    assert!(!dir.join("focus-run").join("checkpoints").exists(), "{e}");
    // NCCL sums CUDA memory only: refused before the data is read.
    let e = fail(&[
        "train",
        "--data",
        s(&toy),
        "--out",
        s(&dir.join("nccl-run")),
        "--preset",
        "tiny",
        "--max-steps",
        "1",
        "--exchange",
        "nccl",
    ]);
    assert_eq!(
        e.matches("--exchange nccl: NCCL sums CUDA memory, and this run is on Cpu")
            .count(),
        1,
        "{e}"
    );
    assert!(!dir.join("nccl-run").exists(), "{e}");
    let a = dir.join("a.en");
    let b = dir.join("b.de");
    std::fs::write(&a, "one\ntwo\nthree\n").unwrap();
    std::fs::write(&b, "eins\nzwei\n").unwrap();
    let e = fail(&[
        "prepare",
        "--src",
        s(&a),
        "--tgt",
        s(&b),
        "--out",
        s(&dir.join("o")),
    ]);
    assert!(
        e.contains("a.en has 3 lines") && e.contains("b.de has 2"),
        "{e}"
    );
    assert_eq!(e.lines().count(), 1, "{e}");

    std::fs::write(&b, b"eins\nzw\xffei\ndrei\n").unwrap();
    let e = fail(&[
        "prepare",
        "--src",
        s(&a),
        "--tgt",
        s(&b),
        "--out",
        s(&dir.join("o")),
    ]);
    assert!(e.contains("b.de, line 2: invalid UTF-8"), "{e}");

    std::fs::write(&b, b"").unwrap();
    let e = fail(&[
        "prepare",
        "--src",
        s(&a),
        "--tgt",
        s(&b),
        "--out",
        s(&dir.join("o")),
    ]);
    assert!(e.contains("b.de: the file is empty"), "{e}");

    let e = fail(&["translate", "--model", s(dir), "--quiet"]);
    assert!(e.contains("neither a bundle"), "{e}");

    let e = fail(&[
        "train",
        "--data",
        s(dir),
        "--out",
        s(&dir.join("run")),
        "--devices",
        "0,1",
    ]);
    assert!(
        e.contains("--devices: the CPU backend is a single device"),
        "{e}"
    );
}
/// Every numeric option's range is checked when the command line is read, before any
/// file is opened: one usage error (exit code 2) naming the option, even where there is
/// nothing to work on (the files named here do not exist).
#[test]
fn bad_option_values_are_refused_before_any_work() {
    let missing = "/nonexistent/transduce-option-test";
    let train = ["train", "--data", missing, "--out", missing];
    let cases: &[(&[&str], &[&str], &str)] = &[
        (
            &[
                "prepare", "--src", missing, "--tgt", missing, "--out", missing,
            ],
            &["--vocab-size", "0"],
            "--vocab-size",
        ),
        (
            &["translate", "--model", missing],
            &["--beam", "0"],
            "--beam",
        ),
        (
            &["translate", "--model", missing],
            &["--alpha", "NaN"],
            "--alpha",
        ),
        (
            &["translate", "--model", missing],
            &["--alpha=-1"],
            "--alpha",
        ),
        (
            &["translate", "--model", missing],
            &["--batch-size", "0"],
            "--batch-size",
        ),
        (&["parse", "--model", missing], &["--beam", "0"], "--beam"),
        (&train, &["--warmup", "0"], "--warmup"),
        (&train, &["--dropout", "1"], "--dropout"),
        (&train, &["--label-smoothing=-0.1"], "--label-smoothing"),
        (&train, &["--lr-factor", "inf"], "--lr-factor"),
        (&train, &["--max-tokens", "0"], "--max-tokens"),
        (&["average", "--run", missing], &["--last", "0"], "--last"),
        (
            &["export", "--model", missing, "--out", missing],
            &["--alpha=-0.5"],
            "--alpha",
        ),
        (&["bench"], &["--steps", "0"], "--steps"),
    ];
    for (command, option, name) in cases {
        let args: Vec<&str> = command.iter().chain(option.iter()).copied().collect();
        let out = bin().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}:\n{stderr}");
        assert!(
            stderr.contains("invalid value") && stderr.contains(name),
            "{args:?} does not name {name}:\n{stderr}"
        );
        assert!(
            !stderr.contains(missing),
            "{args:?} read its files first:\n{stderr}"
        );
    }
    // The same values within range get past the command line (and fail on the files).
    let out = bin()
        .args([
            "translate",
            "--model",
            missing,
            "--beam",
            "1",
            "--alpha",
            "0",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The commands a `--help` text lists, without `help`.
fn commands_of(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// The long options a `--help` text lists.
fn long_options(help: &str) -> Vec<String> {
    help.lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("--") || (l.starts_with('-') && l.contains(", --")))
        .filter_map(|l| {
            let at = l.find("--")?;
            let name: String = l[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            Some(name)
        })
        .filter(|name| !["--help", "--version"].contains(&name.as_str()))
        .collect()
}

/// Whether `text` names `option` whole: `--steps` in "[--steps N]", not in "--steps-per".
fn names(text: &str, option: &str) -> bool {
    text.match_indices(option).any(|(at, _)| {
        let after = text[at + option.len()..].chars().next();
        !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
    })
}

/// The command table of README and docs/CLI.md are written by hand: this checks them against
/// the parser. README's list names every command; CLI.md's reference has a row for each, and
/// the guide's pages name every long option each one's `--help` gives.
#[test]
fn the_docs_name_every_command_and_option_the_parser_has() {
    let root = transduce_testing::repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let cli = std::fs::read_to_string(root.join("docs/CLI.md")).unwrap();
    // Options may be named on the guide's other pages too (training's, the page's).
    let guide: String = [
        "docs/CLI.md",
        "docs/TRAINING.md",
        "docs/WEB.md",
        "docs/LIBRARY.md",
    ]
    .iter()
    .map(|page| std::fs::read_to_string(root.join(page)).unwrap())
    .collect();
    let list = readme
        .split("## Command line")
        .nth(1)
        .expect("README has a Command line section");
    let reference = cli
        .split("## CLI reference")
        .nth(1)
        .expect("docs/CLI.md has a CLI reference");
    let commands = commands_of(&run(&["--help"]));
    assert!(commands.len() >= 10, "{commands:?}");
    let mut missing = Vec::new();
    for command in &commands {
        if !list.contains(&format!("`{command}`")) && !list.contains(&format!("`{command} ")) {
            missing.push(format!("README's Command line does not name `{command}`"));
        }
        if !reference.contains(&format!("| `transduce {command}")) {
            missing.push(format!(
                "docs/CLI.md's reference has no row for `transduce {command}`"
            ));
        }
        let mut helps = vec![run(&[command, "--help"])];
        // Commands of commands (`eval bleu`, `recipe run`).
        let nested = commands_of(&helps[0]);
        for sub in &nested {
            helps.push(run(&[command, sub, "--help"]));
        }
        for option in helps.iter().flat_map(|h| long_options(h)) {
            if option == "--quiet" {
                continue; // every long-running command has it; CLI.md says so once
            }
            if !names(&guide, &option) {
                missing.push(format!(
                    "the guide's pages do not name `{command}`'s {option}"
                ));
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
