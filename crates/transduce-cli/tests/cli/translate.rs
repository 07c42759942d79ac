//! `transduce translate` and `score`: the shipped bundles, n-best lists, noisy-channel
//! reranking, CTranslate2's outputs and the GPU decoder.

use crate::harness::*;
use std::path::Path;
use std::process::Command;
use transduce_testing::repo_root;

/// The bundles shipped in `web/models` load natively and do their task: the translators
/// turn an everyday sentence and a caption into the other language (a word each must hold),
/// the parser gives a tree over exactly the input words.
#[test]
fn shipped_bundles_load_and_run() {
    let models = repo_root().join("web/models");
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.txt");

    for (model, text, words) in [
        (
            "en-de",
            "Where is the train station?\nA man is sleeping on a bench.\n",
            ["Bahnhof", "Mann"],
        ),
        (
            "de-en",
            "Wo ist der Bahnhof?\nEin Mann schläft auf einer Bank.\n",
            ["station", "man"],
        ),
    ] {
        std::fs::write(&input, text).unwrap();
        let out = run(&[
            "translate",
            "--model",
            s(&models.join(model)),
            "--input",
            s(&input),
            "--quiet",
        ]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{model}: {out}");
        for (line, word) in lines.iter().zip(words) {
            assert!(line.contains(word), "{model}: {word:?} not in {line:?}");
        }
    }

    std::fs::write(&input, "The dog saw a man in the park .\n").unwrap();
    let out = run(&[
        "parse",
        "--model",
        s(&models.join("ptb-parser")),
        "--input",
        s(&input),
        "--quiet",
    ]);
    let line = out.lines().next().unwrap();
    let tree = &transduce::task::parse::parse_trees(line).unwrap()[0];
    assert_eq!(tree.words().join(" "), "The dog saw a man in the park .");
}
/// `translate --nbest` lists what beam search finished, best first, the first entry being
/// the plain translation; `score` gives each entry the log-probability the search computed
/// (both in f32), and on references the per-wordpiece mean `eval ppl` gets by its own path.
/// Decoding on several threads (each taking the next batch, the batches made smaller when
/// there are fewer of them than threads) gives the outputs of one thread, in input order,
/// for best translations and n-best lists alike.
#[test]
fn threads_change_no_output() {
    let model = repo_root().join("web/models/en-de");
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.txt");
    let lines = [
        "A man is sleeping on a bench.",
        "",
        "Two dogs are running through the snow.",
        "Where is the train station?",
        "A woman in a red coat is reading a newspaper at the bus stop.",
        "The children play.",
        "A group of people are standing in front of an old building on a sunny day.",
    ];
    std::fs::write(&input, lines.join("\n")).unwrap();
    let translate = |extra: &[&str]| {
        let mut args = vec![
            "translate",
            "--model",
            s(&model),
            "--input",
            s(&input),
            "--quiet",
        ];
        args.extend_from_slice(extra);
        run(&args)
    };
    let one = translate(&["--threads", "1"]);
    assert_eq!(one.lines().count(), lines.len(), "{one}");
    assert_eq!(
        one.lines().nth(1),
        Some(""),
        "an empty line stays empty: {one}"
    );
    for extra in [
        &["--threads", "2"][..],
        &["--threads", "3", "--batch-size", "2"],
        &["--threads", "8", "--batch-size", "1"],
    ] {
        assert_eq!(translate(extra), one, "{extra:?}");
    }
    let nbest = |threads| translate(&["--nbest", "3", "--beam", "4", "--threads", threads]);
    assert_eq!(nbest("1"), nbest("3"));
}

#[test]
fn nbest_lists_and_scores_agree_with_search_and_perplexity() {
    let model = repo_root().join("web/models/en-de");
    let tmp = tempfile::tempdir().unwrap();
    let (src, refs) = (tmp.path().join("src.en"), tmp.path().join("ref.de"));
    std::fs::write(
        &src,
        "Where is the train station?\nA man is sleeping on a bench.\nI like tea.\n",
    )
    .unwrap();
    std::fs::write(
        &refs,
        "Wo ist der Bahnhof?\nEin Mann schläft auf einer Bank.\nIch mag Tee.\n",
    )
    .unwrap();
    let best = translate_file(
        &model,
        &src,
        &tmp.path().join("best.de"),
        &["--compute", "f32"],
    );
    let list_path = tmp.path().join("n.best");
    let list = translate_file(
        &model,
        &src,
        &list_path,
        &["--compute", "f32", "--nbest", "3"],
    );
    let entries: Vec<Vec<&str>> = list.lines().map(|l| l.split(" ||| ").collect()).collect();
    for (i, plain) in best.lines().enumerate() {
        let mine: Vec<&Vec<&str>> = entries.iter().filter(|e| e[0] == i.to_string()).collect();
        assert!((1..=3).contains(&mine.len()), "line {i}: {list}");
        assert_eq!(
            mine[0][1], plain,
            "line {i}: the first entry is the translation"
        );
        let ranks: Vec<f64> = mine.iter().map(|e| e[3].parse().unwrap()).collect();
        assert!(
            ranks.windows(2).all(|w| w[0] >= w[1]),
            "line {i}: {ranks:?}"
        );
    }
    let scores = run(&score_args(&model, &src, &list_path, true));
    let scored: Vec<f64> = scores
        .lines()
        .map(|l| l.split('\t').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(scored.len(), entries.len(), "{scores}");
    // `score` reads the text as the tokenizer splits it; the search may also reach the
    // same text through another split of wordpieces (then two entries read alike), whose
    // log-probability is its own. Each line's best entry is the tokenizer's split here.
    for (k, (entry, score)) in entries.iter().zip(&scored).enumerate() {
        let alike = entries
            .iter()
            .filter(|e| e[0] == entry[0] && e[1] == entry[1])
            .count();
        let first = k == 0 || entries[k - 1][0] != entry[0];
        if first || alike == 1 {
            let searched: f64 = entry[2].parse().unwrap();
            assert!((searched - score).abs() < 1e-3, "{entry:?}: scored {score}");
        }
    }

    // scripts/rerank.py with this model alone, at the bundle's α (2.5), ranks as the beam.
    let scores_path = tmp.path().join("n.scores");
    std::fs::write(&scores_path, &scores).unwrap();
    let rerank = repo_root().join("scripts/rerank.py");
    let list_args = ["--nbest", s(&list_path), "--scores", s(&scores_path)];
    match Command::new("python3")
        .arg(&rerank)
        .args(list_args)
        .args(["--alpha", "2.5"])
        .output()
    {
        Ok(out) => {
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(String::from_utf8(out.stdout).unwrap(), best);
        }
        Err(e) => transduce_testing::skip_part(format_args!(
            "scripts/rerank.py not checked: no python3 ({e})"
        )),
    }

    let scores = run(&score_args(&model, &src, &refs, false));
    let (mut sum, mut pieces) = (0.0, 0.0);
    for line in scores.lines() {
        let (lp, n) = line.split_once('\t').unwrap();
        sum += lp.parse::<f64>().unwrap();
        pieces += n.parse::<f64>().unwrap();
    }
    let ppl = run(&[
        "eval",
        "ppl",
        "--model",
        s(&model),
        "--src",
        s(&src),
        "--tgt",
        s(&refs),
    ]);
    let loss: f64 = ppl
        .split("(loss ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (loss + sum / pieces).abs() < 1e-4,
        "{ppl} vs {sum} / {pieces}"
    );

    // Bad input: more entries than the beam keeps (the beam given, not the bundle's); an
    // empty source; a malformed list.
    let e = fail(&[
        "translate",
        "--model",
        s(&model),
        "--input",
        s(&src),
        "--beam",
        "4",
        "--nbest",
        "5",
    ]);
    assert!(e.contains("--nbest 5") && e.contains("beam 4"), "{e}");
    let holes = tmp.path().join("holes.en");
    std::fs::write(&holes, "A dog.\n\n").unwrap();
    let e = fail(&score_args(&model, &holes, &refs, false));
    assert!(e.contains("line counts differ"), "{e}");
    std::fs::write(&holes, "A dog.\n\nI like tea.\n").unwrap();
    let e = fail(&score_args(&model, &holes, &refs, false));
    assert!(e.contains("holes.en, line 2") && e.contains("empty"), "{e}");
    std::fs::write(&list_path, "0 ||| Ein Hund.\nzwei ||| Tee\n").unwrap();
    let e = fail(&score_args(&model, &src, &list_path, true));
    assert!(e.contains("n.best: line 2"), "{e}");
}
/// `translate --channel` (noisy-channel reranking) picks, on each line, the beam candidate
/// with the best beam score + w · log p(source | candidate) / lp(|source|), computed here
/// from `translate --nbest` and the reverse model's `score`; weight 0 is the plain search.
#[test]
fn channel_reranking_agrees_with_nbest_and_score() {
    let models = repo_root().join("web/models");
    let (model, reverse) = (models.join("en-de"), models.join("de-en"));
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src.en");
    let text = "Where is the train station?\nA man in a blue shirt is playing the guitar on a \
                stage.\nI have no time today, but tomorrow I would like to.\n\nTwo dogs run \
                through the snow.\n";
    std::fs::write(&src, text).unwrap();
    let sources: Vec<&str> = text.lines().collect();
    let (beam, alpha, weight) = ("4", 2.5, 1.0);
    // f32 arithmetic in both models, as `score` computes.
    let flags = ["--beam", beam, "--alpha", "2.5", "--compute", "f32"];

    let list_path = tmp.path().join("n.best");
    let list = translate_file(
        &model,
        &src,
        &list_path,
        &[&flags[..], &["--nbest", beam]].concat(),
    );
    let entries: Vec<(usize, String, f64)> = list
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(" ||| ").collect();
            (
                f[0].parse().unwrap(),
                f[1].to_string(),
                f[3].parse().unwrap(),
            )
        })
        .collect();
    // The reverse model scores each source given each non-empty candidate.
    let scored: Vec<&(usize, String, f64)> = entries
        .iter()
        .filter(|e| !e.1.is_empty() && !sources[e.0].is_empty())
        .collect();
    let (cands, origs) = (tmp.path().join("cands.de"), tmp.path().join("origs.en"));
    let join = |f: &dyn Fn(&&(usize, String, f64)) -> String| {
        scored.iter().map(f).collect::<Vec<_>>().join("\n") + "\n"
    };
    std::fs::write(&cands, join(&|e| e.1.clone())).unwrap();
    std::fs::write(&origs, join(&|e| sources[e.0].to_string())).unwrap();
    let channel = run(&score_args(&reverse, &cands, &origs, false));
    let mut best: Vec<Option<(f64, String)>> = vec![None; sources.len()];
    for (entry, row) in scored.iter().zip(channel.lines()) {
        let (log_prob, pieces) = row.split_once('\t').unwrap();
        let lp = ((5.0 + pieces.parse::<f64>().unwrap()) / 6.0).powf(alpha);
        let total = entry.2 + weight * log_prob.parse::<f64>().unwrap() / lp;
        if best[entry.0].as_ref().is_none_or(|b| total > b.0) {
            best[entry.0] = Some((total, entry.1.clone()));
        }
    }
    let expected: String = best
        .iter()
        .map(|b| b.as_ref().map_or("", |b| b.1.as_str()).to_string() + "\n")
        .collect();

    let channel_flags = ["--channel", s(&reverse), "--channel-weight"];
    let reranked = translate_file(
        &model,
        &src,
        &tmp.path().join("nc.de"),
        &[&flags[..], &channel_flags, &["1.0"]].concat(),
    );
    assert_eq!(reranked, expected);
    let plain = translate_file(&model, &src, &tmp.path().join("plain.de"), &flags);
    let zero = translate_file(
        &model,
        &src,
        &tmp.path().join("zero.de"),
        &[&flags[..], &channel_flags, &["0"]].concat(),
    );
    assert_eq!(zero, plain, "weight 0 is the plain search");
    // Its n-best list: ranked by the combined score, the first entry the translation.
    let nbest = translate_file(
        &model,
        &src,
        &tmp.path().join("nc.best"),
        &[&flags[..], &channel_flags, &["1.0", "--nbest", "2"]].concat(),
    );
    for (i, line) in reranked.lines().enumerate() {
        let mine: Vec<Vec<&str>> = nbest
            .lines()
            .map(|l| l.split(" ||| ").collect::<Vec<_>>())
            .filter(|e| e[0] == i.to_string())
            .collect();
        assert_eq!(mine[0][1], line, "line {i}: {nbest}");
        let ranks: Vec<f64> = mine.iter().map(|e| e[3].parse().unwrap()).collect();
        assert!(
            ranks.windows(2).all(|w| w[0] >= w[1]),
            "line {i}: {ranks:?}"
        );
    }

    // Bad input: a channel in the same direction; no weight given or recorded; a weight
    // without a channel; a negative weight.
    let out = tmp.path().join("x").display().to_string();
    let base = [
        "translate",
        "--model",
        s(&model),
        "--input",
        s(&src),
        "--output",
        &out,
    ];
    let e = fail(
        &[
            &base[..],
            &["--channel", s(&model), "--channel-weight", "0.3"],
        ]
        .concat(),
    );
    assert!(e.contains("needs a model from de to en"), "{e}");
    let unrecorded = tmp.path().join("en-de");
    std::fs::create_dir(&unrecorded).unwrap();
    for file in ["model.safetensors", "tokenizer.json"] {
        std::fs::copy(model.join(file), unrecorded.join(file)).unwrap();
    }
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(model.join("config.json")).unwrap()).unwrap();
    config.as_object_mut().unwrap().remove("channel");
    std::fs::write(unrecorded.join("config.json"), config.to_string()).unwrap();
    let mut args = base.to_vec();
    args[2] = s(&unrecorded);
    let e = fail(&[&args[..], &["--channel", s(&reverse)]].concat());
    assert!(e.contains("give --channel-weight"), "{e}");
    let e = fail(&[&base[..], &["--channel-weight", "0.3"]].concat());
    assert!(e.contains("--channel"), "{e}");
    let e = fail(
        &[
            &base[..],
            &["--channel", s(&reverse), "--channel-weight=-1"],
        ]
        .concat(),
    );
    assert!(e.contains("negative"), "{e}");
    assert!(!Path::new(&out).exists(), "no output on bad input");
}
/// A shipped bundle's `channel` names a translator the page lists that translates the other
/// way, and `translate --channel` with it alone (the weight its config records) runs.
#[test]
fn shipped_channels_name_a_listed_reverse_translator() {
    let models = repo_root().join("web/models");
    let index: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(models.join("index.json")).unwrap()).unwrap();
    let config = |id: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(models.join(id).join("config.json")).unwrap())
            .unwrap()
    };
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.txt");
    let mut checked = 0;
    for entry in &index {
        let id = entry["id"].as_str().unwrap();
        let forward = config(id);
        let Some(reverse) = forward["channel"]["model"].as_str() else {
            continue;
        };
        assert!(
            index.iter().any(|e| e["id"] == reverse),
            "{id}: channel {reverse} is not in index.json"
        );
        let task = &config(reverse)["task"];
        assert_eq!(
            task["source"], forward["task"]["target"],
            "{id} → {reverse}"
        );
        assert_eq!(
            task["target"], forward["task"]["source"],
            "{id} → {reverse}"
        );
        let text = match forward["task"]["source"].as_str().unwrap() {
            "en" => "A man is sleeping on a bench.\n",
            _ => "Ein Mann schläft auf einer Bank.\n",
        };
        std::fs::write(&input, text).unwrap();
        let out = translate_file(
            &models.join(id),
            &input,
            &tmp.path().join("out.txt"),
            &["--channel", s(&models.join(reverse))],
        );
        assert_eq!(out.lines().count(), 1, "{id}: {out}");
        checked += 1;
    }
    assert!(checked > 0, "no shipped bundle records a channel");
}
/// Each shipped translator's outputs for a few test2016 sentences are fixed: greedy and beam 4
/// give, token for token, what CTranslate2 gives from the same bundle converted by
/// `scripts/ct2.py` (tests/fixtures/README.md), one sentence at a time and all in one batch.
/// Both engines multiply in f32 here (`--compute f32`; an int8 bundle's weights widened to
/// q·scale): CT2's int8 quantizes activations its own way, so it is no reference for ours.
#[test]
fn shipped_translator_gives_ct2s_outputs() {
    let root = repo_root();
    let fixtures = root.join("tests/fixtures");
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("web/models/index.json")).unwrap())
            .unwrap();
    let translators: Vec<_> = index
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["task"] == "translate")
        .collect();
    assert!(
        !translators.is_empty(),
        "web/models/index.json lists no translator"
    );
    let tmp = tempfile::tempdir().unwrap();
    for entry in translators {
        let field = |name: &str| {
            entry[name]
                .as_str()
                .unwrap_or_else(|| panic!("web/models/index.json: {entry} has no \"{name}\""))
        };
        let (id, src, tgt) = (field("id"), field("source"), field("target"));
        let bundle = root.join("web/models").join(id);
        let input = fixtures.join(format!("browser-sentences.{src}"));
        for (beam, kind) in [("1", "greedy"), ("4", "beam4")] {
            let name = format!("{id}.{kind}.{tgt}");
            let expected = std::fs::read_to_string(fixtures.join(&name)).unwrap_or_else(|e| {
                panic!("tests/fixtures/{name}: {e} (make it with `scripts/ct2.py check --save`, tests/fixtures/README.md)")
            });
            for batch in ["1", "32"] {
                let output = tmp.path().join(format!("{id}-b{beam}-n{batch}.{tgt}"));
                let got = translate_file(
                    &bundle,
                    &input,
                    &output,
                    &["--beam", beam, "--batch-size", batch, "--compute", "f32"],
                );
                for (i, (g, e)) in got.lines().zip(expected.lines()).enumerate() {
                    assert_eq!(g, e, "{id}, beam {beam}, batch {batch}, line {}", i + 1);
                }
                assert_eq!(got.lines().count(), expected.lines().count(), "{id}");
            }
        }
    }
}
/// `--backend wgpu` decodes one model on the GPU decoder: the shipped translators give the
/// same fixtures CTranslate2 gives (greedy and beam 4), and the parser the same trees as on
/// the CPU. Runs on lavapipe in CI; skips where wgpu finds no adapter.
#[test]
fn gpu_decoder_gives_the_cpus_outputs() {
    let root = repo_root();
    let fixtures = root.join("tests/fixtures");
    let tmp = tempfile::tempdir().unwrap();
    for (id, src, tgt) in [("en-de", "en", "de"), ("de-en", "de", "en")] {
        let bundle = root.join("web/models").join(id);
        let input = fixtures.join(format!("browser-sentences.{src}"));
        for (beam, kind) in [("1", "greedy"), ("4", "beam4")] {
            let output = tmp.path().join(format!("{id}-{kind}.{tgt}"));
            let args = [
                "translate",
                "--model",
                s(&bundle),
                "--input",
                s(&input),
                "--output",
                s(&output),
                "--quiet",
                "--backend",
                "wgpu",
                "--beam",
                beam,
            ];
            let out = bin().args(args).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            if !out.status.success() && stderr.contains("no usable GPU adapter") {
                transduce_testing::skip(format_args!(
                    "gpu_decoder_gives_the_cpus_outputs: {stderr}"
                ));
                return;
            }
            assert!(out.status.success(), "{stderr}");
            assert!(stderr.contains("GPU decoder on"), "{stderr}");
            let expected =
                std::fs::read_to_string(fixtures.join(format!("{id}.{kind}.{tgt}"))).unwrap();
            assert_eq!(
                std::fs::read_to_string(&output).unwrap(),
                expected,
                "{id}, beam {beam}"
            );
        }
    }
    let parser = root.join("web/models/ptb-parser");
    let sentences = tmp.path().join("sentences.txt");
    std::fs::write(
        &sentences,
        "The dog saw a man in the park .\nStocks fell sharply on Monday .\n",
    )
    .unwrap();
    let parse = |backend: &str| {
        run(&[
            "parse",
            "--model",
            s(&parser),
            "--raw",
            "--input",
            s(&sentences),
            "--quiet",
            "--compute",
            "f32",
            "--backend",
            backend,
        ])
        .lines()
        .filter(|l| l.starts_with('('))
        .map(str::to_string)
        .collect::<Vec<_>>()
    };
    // The GPU decoder multiplies in f32 (an int8 bundle's weights dequantized), as the CPU
    // does with `--compute f32`.
    let cpu = parse("cpu");
    assert_eq!(cpu.len(), 2);
    assert_eq!(parse("wgpu"), cpu);
}
