//! The `transduce` binary end to end on a small synthetic corpus: prepare, train,
//! stop-and-resume equals uninterrupted training, average, translate, export, load.

use std::path::{Path, PathBuf};
use std::process::Command;

/// This package's folder as `cargo test` gives it at run time, so that a build cache shared by
/// two checkouts tests the files of the one it runs in; the compile-time path otherwise.
fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_transduce"));
    c.env("RUST_BACKTRACE", "1");
    c
}

fn run(args: &[&str]) -> String {
    let out = bin().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "transduce {args:?} failed:\n{stderr}");
    String::from_utf8(out.stdout).unwrap() + &stderr
}

fn fail(args: &[&str]) -> String {
    let out = bin().args(args).output().unwrap();
    assert!(!out.status.success(), "transduce {args:?} should fail");
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// A toy "translation" corpus: the target spells the source's numbers as words.
fn corpus(dir: &Path) -> (PathBuf, PathBuf) {
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
fn translate_file(model: &Path, input: &Path, out: &Path, flags: &[&str]) -> String {
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
fn score_args<'a>(model: &'a Path, src: &'a Path, tgt: &'a Path, nbest: bool) -> Vec<&'a str> {
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

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The toy corpus in `dir`, prepared (validating on the training pairs): source, target,
/// prepared folder.
fn prepare_toy(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let (src, tgt) = corpus(dir);
    let data = dir.join("data");
    let out = run(&[
        "prepare",
        "--src",
        s(&src),
        "--tgt",
        s(&tgt),
        "--valid-src",
        s(&src),
        "--valid-tgt",
        s(&tgt),
        "--vocab-size",
        "60",
        "--out",
        s(&data),
    ]);
    assert!(out.contains("kept 300 training"), "{out}");
    (src, tgt, data)
}

#[test]
fn prepare_train_resume_average_translate_export() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (src, tgt, data) = prepare_toy(dir);

    let train = |out_dir: &Path, steps: &str, resume: bool| {
        let mut args = vec![
            "train",
            "--data",
            s(&data),
            "--out",
            s(out_dir),
            "--preset",
            "tiny",
            "--dropout",
            "0.1",
            "--label-smoothing",
            "0.1",
            "--max-tokens",
            "400",
            "--warmup",
            "20",
            "--max-steps",
            steps,
            "--checkpoint-steps",
            "3",
            "--keep",
            "10",
            "--seed",
            "5",
            "--quiet",
        ];
        if resume {
            args.push("--resume");
        }
        run(&args)
    };
    // Uninterrupted: 6 steps. Interrupted: 3 steps, then resumed to 6.
    let whole = dir.join("whole");
    train(&whole, "6", false);
    let parts = dir.join("parts");
    train(&parts, "3", false);
    let resumed = train(&parts, "6", true);
    assert!(resumed.contains("resuming from"), "{resumed}");
    let a = std::fs::read(whole.join("checkpoints/step-00000006/model.safetensors")).unwrap();
    let b = std::fs::read(parts.join("checkpoints/step-00000006/model.safetensors")).unwrap();
    // Bitwise equal on the CPU backend. Steps 4–6 of the resumed run used Adam's moments
    // and step count restored from step 3, the batch order and dropout seeds of steps 4–6,
    // so equal weights at step 6 also show those were restored exactly. (The optimizer
    // files themselves may list parameters in another order.)
    assert!(a == b, "resumed weights differ from uninterrupted ones");
    let at3 = std::fs::read(whole.join("checkpoints/step-00000003/model.safetensors")).unwrap();
    assert!(at3 != a, "training did not change the weights");
    let metrics = std::fs::read_to_string(whole.join("metrics.jsonl")).unwrap();
    assert!(metrics.lines().any(|l| l.contains("valid_ppl")));
    // A second fresh run into a used folder is refused, not overwritten.
    let refused = fail(&[
        "train",
        "--data",
        s(&data),
        "--out",
        s(&whole),
        "--preset",
        "tiny",
        "--max-steps",
        "1",
    ]);
    assert!(refused.contains("--resume"), "{refused}");

    let avg = dir.join("avg.safetensors");
    run(&[
        "average",
        "--run",
        s(&whole),
        "--last",
        "2",
        "--out",
        s(&avg),
    ]);
    let too_many = fail(&["average", "--run", s(&whole), "--last", "9"]);
    assert!(too_many.contains("only 2 checkpoints"), "{too_many}");
    // The same mean over weights named one by one (a checkpoint folder, a file; any order),
    // as a soup of runs is made.
    let soup = dir.join("soup.safetensors");
    let step3 = whole.join("checkpoints/step-00000003/model.safetensors");
    let step6 = whole.join("checkpoints/step-00000006");
    run(&[
        "average",
        "--inputs",
        s(&step6),
        s(&step3),
        "--out",
        s(&soup),
    ]);
    assert!(
        std::fs::read(&soup).unwrap() == std::fs::read(&avg).unwrap(),
        "--inputs differs from --run --last 2"
    );
    let no_out = fail(&["average", "--inputs", s(&step6), s(&step3)]);
    assert!(no_out.contains("--inputs needs --out"), "{no_out}");
    let one = fail(&["average", "--inputs", s(&step3), "--out", s(&soup)]);
    assert!(one.contains("--inputs"), "{one}");
    let both = fail(&["average", "--inputs", s(&step6), s(&step3), "--last", "2"]);
    assert!(both.contains("cannot be used with"), "{both}");

    let input = dir.join("in.txt");
    std::fs::write(&input, "1 2 3\n\n4 5\n").unwrap();
    let translated = dir.join("out.txt");
    run(&[
        "translate",
        "--model",
        s(&whole),
        "--checkpoint",
        s(&avg),
        "--input",
        s(&input),
        "--output",
        s(&translated),
        "--beam",
        "2",
        "--max-extra",
        "5",
        "--quiet",
    ]);
    let lines: Vec<String> = std::fs::read_to_string(&translated)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[1], "");

    let bundle = dir.join("bundle");
    run(&[
        "export",
        "--model",
        s(&whole),
        "--out",
        s(&bundle),
        "--f16",
        "--metric",
        "bleu=1.5",
        "--beam",
        "1",
        "--alpha",
        "1.25",
    ]);
    let config = std::fs::read_to_string(bundle.join("config.json")).unwrap();
    assert!(
        config.contains("\"bleu\": 1.5") && config.contains("sha256"),
        "{config}"
    );
    assert!(
        config.contains("\"beam\": 1,")
            && config.contains("\"alpha\": 1.25")
            && config.contains("\"steps\": 6,"),
        "{config}"
    );
    // Without decoding flags, `translate` uses the bundle's settings.
    let translate_bundle = |out: &Path, flags: &[&str]| translate_file(&bundle, &input, out, flags);
    let implicit = translate_bundle(&dir.join("implicit.txt"), &[]);
    let explicit = translate_bundle(
        &dir.join("explicit.txt"),
        &["--beam", "1", "--alpha", "1.25"],
    );
    assert_eq!(implicit, explicit);
    assert_eq!(implicit.lines().count(), 3);
    // An ensemble of a model with itself scores every token as the model alone does.
    let twice = translate_bundle(&dir.join("twice.txt"), &["--model", s(&bundle)]);
    assert_eq!(twice, implicit);
    // Different members: a run folder's two checkpoints, paired in order.
    let checkpoints: Vec<PathBuf> = std::fs::read_dir(whole.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let ensemble_out = dir.join("ensemble.txt");
    let mut args = vec![
        "translate",
        "--input",
        s(&input),
        "--output",
        s(&ensemble_out),
    ];
    for c in checkpoints.iter().take(2) {
        args.extend(["--model", s(&whole), "--checkpoint", s(c)]);
    }
    args.push("--quiet");
    run(&args);
    assert_eq!(
        std::fs::read_to_string(&ensemble_out)
            .unwrap()
            .lines()
            .count(),
        3
    );
    let e = fail(&[
        "translate",
        "--model",
        s(&whole),
        "--model",
        s(&bundle),
        "--checkpoint",
        s(&avg),
        "--input",
        s(&input),
    ]);
    assert!(
        e.contains("1 --checkpoint for 2 --model: give none, or one for each model in order"),
        "{e}"
    );
    let e = fail(&[
        "export",
        "--model",
        s(&whole),
        "--out",
        s(&dir.join("b0")),
        "--beam",
        "0",
    ]);
    // Refused when the command line is read (bad_option_values_are_refused_before_any_work).
    assert!(e.contains("invalid value '0' for '--beam"), "{e}");
    let ppl = run(&[
        "eval",
        "ppl",
        "--model",
        s(&bundle),
        "--src",
        s(&src),
        "--tgt",
        s(&tgt),
    ]);
    assert!(ppl.contains("perplexity"), "{ppl}");
}

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

/// `--devices 0,0` opens two wgpu devices on the first adapter (lavapipe on a machine
/// without a GPU) and trains data-parallel through the whole loop: steps, validation,
/// checkpoint.
#[test]
fn data_parallel_training_on_two_wgpu_devices() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, _, data) = prepare_toy(dir);
    let out = bin()
        .args([
            "train",
            "--data",
            s(&data),
            "--out",
            s(&dir.join("run")),
            "--preset",
            "tiny",
            "--backend",
            "wgpu",
            "--devices",
            "0,0",
            "--max-tokens",
            "400",
            "--max-steps",
            "2",
            "--quiet",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("finds no Vulkan/Metal/DX12 adapter") {
        println!("SKIP: data_parallel_training_on_two_wgpu_devices: {stderr}");
        return;
    }
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("device 0: wgpu adapter 0") && stderr.contains("device 1: wgpu adapter 0"),
        "{stderr}"
    );
    assert!(
        stderr.contains("stopped at step 2") && stderr.contains("validation perplexity"),
        "{stderr}"
    );
}

/// `train --init` starts a new run from trained weights: from a bundle (its architecture
/// taken, no --preset), from a checkpoint folder (same f32 weights, so the same first
/// loss), never from another vocabulary; and a run so started begins near where its source
/// ended (another batch), far below a run from random weights with the same seed.
#[test]
fn train_init_starts_from_trained_weights() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (src, tgt, data) = prepare_toy(dir);
    let train = |out: &Path, steps: &str, extra: &[&str]| {
        let mut args = vec![
            "train",
            "--data",
            s(&data),
            "--out",
            s(out),
            "--max-tokens",
            "400",
            "--warmup",
            "10",
            "--lr-factor",
            "2",
            "--max-steps",
            steps,
            "--checkpoint-steps",
            "100",
            "--seed",
            "5",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        run(&args)
    };
    let source = dir.join("source");
    train(&source, "40", &["--preset", "tiny"]);
    let bundle = dir.join("bundle");
    run(&["export", "--model", s(&source), "--out", s(&bundle)]);

    let fresh = dir.join("fresh");
    train(&fresh, "1", &["--preset", "tiny"]);
    let from_bundle = dir.join("from-bundle");
    let said = train(&from_bundle, "1", &["--init", s(&bundle)]);
    assert!(said.contains("starting from the weights in"), "{said}");
    let run_json = std::fs::read_to_string(from_bundle.join("run.json")).unwrap();
    assert!(run_json.contains("\"init\""), "{run_json}");
    let checkpoint = source.join("checkpoints/step-00000040");
    let from_checkpoint = dir.join("from-checkpoint");
    train(
        &from_checkpoint,
        "1",
        &["--preset", "tiny", "--init", s(&checkpoint)],
    );

    let first = |run: &Path| logged_losses(run)[0];
    let (random, trained) = (first(&fresh), first(&from_bundle));
    assert_eq!(
        trained,
        first(&from_checkpoint),
        "bundle and checkpoint differ"
    );
    let source_last = *logged_losses(&source).last().unwrap();
    assert!(
        trained < 0.75 * random && (trained - source_last).abs() < 0.15 * source_last,
        "first loss from trained weights {trained}, from random ones {random}, source's last {source_last}"
    );

    // Another vocabulary is refused, naming the way out.
    let other = dir.join("other");
    run(&[
        "prepare",
        "--src",
        s(&src),
        "--tgt",
        s(&tgt),
        "--vocab-size",
        "50",
        "--out",
        s(&other),
    ]);
    let e = fail(&[
        "train",
        "--data",
        s(&other),
        "--out",
        s(&dir.join("x")),
        "--init",
        s(&bundle),
    ]);
    assert!(
        e.contains("another vocabulary") && e.contains("--tokenizer"),
        "{e}"
    );
    let e = fail(&[
        "train",
        "--data",
        s(&data),
        "--out",
        s(&dir.join("y")),
        "--init",
        s(&dir.join("nothing")),
    ]);
    assert!(e.contains("--init") && e.contains("nothing"), "{e}");
    // The architecture must be the weights': a wrong preset names the tensor.
    let e = fail(&[
        "train",
        "--data",
        s(&data),
        "--out",
        s(&dir.join("z")),
        "--preset",
        "mini",
        "--init",
        s(&bundle),
    ]);
    assert!(e.contains("model.safetensors"), "{e}");
}

/// The training losses a run logged, step by step.
fn logged_losses(run: &Path) -> Vec<f64> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|line| {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            record.get("loss").and_then(|l| l.as_f64())
        })
        .collect()
}

/// `train --graph` keeps Adam's state in the checkpoint format burn's Adam uses, so runs
/// resume exactly with it and interchange checkpoints with eager runs. On the CPU (no
/// graphs) its steps run eagerly with the device-scalar Adam, and it says so:
/// - 3 steps, then resumed to 6, give the weights of 6 uninterrupted steps, bit for bit
///   (moments, step count and schedule restored exactly);
/// - an eager run resumes a graph run's checkpoint, and a graph run an eager run's, with
///   the losses of the uninterrupted run to 1e-5 relative (the two Adams round the same
///   formulas through different kernels: last-bit differences).
#[test]
fn graph_runs_resume_exactly_and_share_checkpoints_with_eager_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, _, data) = prepare_toy(dir);
    let train = |out_dir: &Path, steps: &str, resume: bool, graph: bool| {
        let mut args = vec![
            "train",
            "--data",
            s(&data),
            "--out",
            s(out_dir),
            "--preset",
            "tiny",
            "--dropout",
            "0",
            "--max-tokens",
            "400",
            "--warmup",
            "20",
            "--max-steps",
            steps,
            "--checkpoint-steps",
            "3",
            "--keep",
            "10",
            "--seed",
            "5",
            "--quiet",
        ];
        if resume {
            args.push("--resume");
        }
        if graph {
            args.push("--graph");
        }
        run(&args)
    };
    let whole = dir.join("whole");
    let out = train(&whole, "6", false, true);
    assert!(
        out.contains("graph: 6 eager steps: the CPU backend captures no graphs"),
        "{out}"
    );
    let parts = dir.join("parts");
    train(&parts, "3", false, true);
    train(&parts, "6", true, true);
    let weights = |run: &Path| {
        std::fs::read(run.join("checkpoints/step-00000006/model.safetensors")).unwrap()
    };
    assert!(
        weights(&whole) == weights(&parts),
        "resumed graph run differs"
    );

    let close = |a: &[f64], b: &[f64]| {
        assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-5 * y.abs(), "{a:?} vs {b:?}");
        }
    };
    let graph_then_eager = dir.join("graph-then-eager");
    train(&graph_then_eager, "3", false, true);
    train(&graph_then_eager, "6", true, false);
    close(&logged_losses(&graph_then_eager), &logged_losses(&whole));
    let eager_then_graph = dir.join("eager-then-graph");
    train(&eager_then_graph, "3", false, false);
    train(&eager_then_graph, "6", true, true);
    close(&logged_losses(&eager_then_graph), &logged_losses(&whole));
    assert!(logged_losses(&whole)[5] < logged_losses(&whole)[0]);
}

/// Kernel fusion changes how operations are grouped into kernels, not what they compute:
/// a few wgpu training steps with fusion on and off (`--no-fusion`) log the same losses
/// within 1e-4 relative (f32 kernels may sum in different orders: not bitwise).
#[test]
fn fusion_on_and_off_train_alike_on_wgpu() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, _, data) = prepare_toy(dir);
    let train = |name: &str, extra: &[&str]| {
        let run_dir = dir.join(name);
        let mut args = vec![
            "train",
            "--data",
            s(&data),
            "--out",
            s(&run_dir),
            "--preset",
            "tiny",
            "--dropout",
            "0",
            "--backend",
            "wgpu",
            "--max-tokens",
            "400",
            "--max-steps",
            "4",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        let out = bin().args(&args).output().unwrap();
        (out, run_dir)
    };
    let (out, fused) = train("fused", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("no usable GPU adapter") {
        println!("SKIP: fusion_on_and_off_train_alike_on_wgpu: {stderr}");
        return;
    }
    assert!(out.status.success(), "{stderr}");
    let (out, unfused) = train("unfused", &["--no-fusion"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (a, b) = (logged_losses(&fused), logged_losses(&unfused));
    assert_eq!(a.len(), 4, "{a:?}");
    assert_eq!(a.len(), b.len());
    for (step, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            (x - y).abs() / x.abs() < 1e-4,
            "step {step}: fused {x}, unfused {y}"
        );
    }
}

/// Half precision is for the GPU backends: the CPU backend says so before any work.
#[test]
fn half_precision_on_the_cpu_is_one_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, _, data) = prepare_toy(dir);
    for precision in ["f16", "bf16"] {
        let e = fail(&[
            "train",
            "--data",
            s(&data),
            "--out",
            s(&dir.join(precision)),
            "--preset",
            "tiny",
            "--precision",
            precision,
        ]);
        assert!(
            e.contains(&format!(
                "--precision {precision}: the CPU backend trains in f32 only"
            )),
            "{e}"
        );
        assert!(!dir.join(precision).join("checkpoints").exists());
    }
    let e = fail(&[
        "train",
        "--data",
        s(&data),
        "--out",
        s(dir),
        "--precision",
        "f8",
    ]);
    assert!(
        e.contains("`f8` is not a precision; expected f32, f16 or bf16"),
        "{e}"
    );
}

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

#[test]
fn table3_prints_every_row() {
    let out = run(&["table3"]);
    for row in ["base", "A1", "B2", "C7", "D4", "E", "big"] {
        assert!(
            out.lines().any(|l| l.starts_with(row)),
            "{row} missing:\n{out}"
        );
    }
}

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

/// Parsing end to end (§6.3) on a few treebank-style trees: `prepare --task parse` reports
/// the malformed tree with its line, a briefly trained model's constrained output is a
/// tree over exactly the input words for every sentence (whatever the model learned), and
/// EVALB-identical scoring reads it without a length mismatch.
#[test]
fn parse_prepare_train_decode_and_score() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let trees = [
        "( (S (NP-SBJ (DT The) (NN dog)) (VP (VBZ barks)) (. .)) )",
        "( (S (NP-SBJ (NNP Mary)) (VP (VBD saw) (NP (DT a) (NN cat))) (. .)) )",
        "( (S (NP-SBJ-1 (DT The) (JJ big) (NN cat)) (VP (VBD slept) (-NONE- *-1)) (. .)) )",
        "( (S (NP-SBJ (PRP He)) (VP (VBZ runs) (PP (IN in) (NP (DT the) (NN park)))) (. .)) )",
    ];
    let mut text = String::new();
    for _ in 0..8 {
        for t in trees {
            text.push_str(t);
            text.push('\n');
        }
    }
    let train = dir.join("train.trees");
    std::fs::write(&train, format!("{text}(S (NP (DT a) (NN b)\n")).unwrap();
    let gold = dir.join("gold.trees");
    std::fs::write(&gold, trees.join("\n") + "\n").unwrap();
    let data = dir.join("data");
    let out = run(&[
        "prepare",
        "--task",
        "parse",
        "--trees",
        s(&train),
        "--valid-trees",
        s(&gold),
        "--vocab-size",
        "40",
        "--out",
        s(&data),
    ]);
    assert!(out.contains("skipped 1 malformed"), "{out}");
    assert!(out.contains("train.trees: line 33"), "{out}");

    // A tiny model trained briefly on a prepared folder, with `extra` flags.
    let train_tiny = |data: &Path, out: &Path, extra: &[&str]| {
        let mut args = vec![
            "train",
            "--data",
            s(data),
            "--out",
            s(out),
            "--preset",
            "tiny",
            "--max-tokens",
            "400",
            "--warmup",
            "20",
            "--max-steps",
            "30",
            "--quiet",
        ];
        args.extend(extra);
        run(&args);
    };
    let run_dir = dir.join("run");
    train_tiny(&data, &run_dir, &[]);
    let input = dir.join("input.txt");
    std::fs::write(
        &input,
        "The dog barks .\nMary saw a big dog in the park .\nHe runs\n",
    )
    .unwrap();
    let parsed = dir.join("parsed.txt");
    run(&[
        "parse",
        "--model",
        s(&run_dir),
        "--input",
        s(&input),
        "--output",
        s(&parsed),
        "--beam",
        "3",
        "--quiet",
    ]);
    let out = std::fs::read_to_string(&parsed).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3);
    for (line, words) in lines
        .iter()
        .zip(std::fs::read_to_string(&input).unwrap().lines())
    {
        let tree = &transduce::task::parse::parse_trees(line).unwrap()[0];
        assert_eq!(tree.words().join(" "), words, "{line}");
    }

    // Gold trees as input: words and tags are taken from them, so EVALB sees no mismatch.
    let test = dir.join("test.trees");
    run(&[
        "parse",
        "--model",
        s(&run_dir),
        "--input",
        s(&gold),
        "--output",
        s(&test),
        "--quiet",
    ]);
    let report = run(&["eval", "f1", "--gold", s(&gold), "--test", s(&test)]);
    assert!(
        report.contains("Number of Error sentence  =      0"),
        "{report}"
    );
    assert!(
        report.contains("Tagging accuracy          = 100.00"),
        "{report}"
    );

    // Word focus (beyond the paper): the flag reaches the bundle's config, and its output,
    // with and without the constraint, is still a tree over the input words.
    let focus_dir = dir.join("focus");
    train_tiny(&data, &focus_dir, &["--word-focus"]);
    let run_json = std::fs::read_to_string(focus_dir.join("run.json")).unwrap();
    assert!(run_json.contains("\"word_focus\": true"), "{run_json}");
    for extra in [None, Some("--no-constraint")] {
        let mut args = vec![
            "parse",
            "--model",
            s(&focus_dir),
            "--input",
            s(&gold),
            "--output",
            s(&test),
            "--quiet",
        ];
        args.extend(extra);
        run(&args);
        let report = run(&["eval", "f1", "--gold", s(&gold), "--test", s(&test)]);
        assert!(
            report.contains("Number of Valid sentence  =      4"),
            "{extra:?}: {report}"
        );
    }

    // An ensemble of a plain and a word-focus model: each member gets what it needs, and
    // the output is still a tree over the input words.
    let ensemble_trees = dir.join("ensemble.trees");
    run(&[
        "parse",
        "--model",
        s(&run_dir),
        "--model",
        s(&focus_dir),
        "--input",
        s(&gold),
        "--output",
        s(&ensemble_trees),
        "--quiet",
    ]);
    let report = run(&[
        "eval",
        "f1",
        "--gold",
        s(&gold),
        "--test",
        s(&ensemble_trees),
    ]);
    assert!(
        report.contains("Number of Valid sentence  =      4"),
        "{report}"
    );
    // Data prepared with the tokenizer of an earlier run (here: other trees, one of them
    // with a label that run has no token for) trains a model that ensembles with it.
    let more = dir.join("more.trees");
    std::fs::write(
        &more,
        format!("{text}(S (UCP (NN a) (CC and) (JJ b)) (VP (VBZ runs)))\n"),
    )
    .unwrap();
    let reuse_data = dir.join("reuse-data");
    let out = run(&[
        "prepare",
        "--task",
        "parse",
        "--trees",
        s(&more),
        "--tokenizer",
        s(&run_dir),
        "--out",
        s(&reuse_data),
    ]);
    assert!(out.contains("no token for (UCP )UCP"), "{out}");
    assert!(
        out.contains("1 with labels outside the vocabulary"),
        "{out}"
    );
    assert_eq!(
        std::fs::read(reuse_data.join("tokenizer.json")).unwrap(),
        std::fs::read(data.join("tokenizer.json")).unwrap()
    );
    let reuse_run = dir.join("reuse-run");
    train_tiny(&reuse_data, &reuse_run, &[]);
    run(&[
        "parse",
        "--model",
        s(&run_dir),
        "--model",
        s(&reuse_run),
        "--input",
        s(&gold),
        "--output",
        s(&ensemble_trees),
        "--quiet",
    ]);
    assert_eq!(
        std::fs::read_to_string(&ensemble_trees)
            .unwrap()
            .lines()
            .count(),
        4
    );
    let e = fail(&[
        "prepare",
        "--task",
        "parse",
        "--trees",
        s(&more),
        "--tokenizer",
        s(&dir.join("nowhere")),
        "--out",
        s(&reuse_data),
    ]);
    assert!(e.contains("nowhere"), "{e}");
    let e = fail(&[
        "prepare",
        "--task",
        "parse",
        "--trees",
        s(&more),
        "--tokenizer",
        s(&run_dir),
        "--vocab-size",
        "50",
        "--out",
        s(&reuse_data),
    ]);
    assert!(e.contains("cannot be used with"), "{e}");

    // Members with different vocabularies cannot decode as one ensemble: one error naming
    // both. Voting needs no shared vocabulary, but a translator is refused there too.
    let translator = manifest_dir().join("../../web/models/en-de");
    for (combine, why) in [
        ("mean", "must share one tokenizer"),
        ("vote", "task Translate"),
    ] {
        let e = fail(&[
            "parse",
            "--model",
            s(&run_dir),
            "--model",
            s(&translator),
            "--combine",
            combine,
            "--input",
            s(&gold),
        ]);
        assert!(e.contains(s(&translator)) && e.contains(why), "{e}");
    }

    // Voting (`--combine vote`): three copies of one model give that model's trees back,
    // and parsers with different vocabularies, which cannot decode as one ensemble, vote.
    let parse_to = |models: &[&Path], extra: &[&str], out: &Path| {
        let mut args = vec!["parse"];
        for m in models {
            args.extend(["--model", s(m)]);
        }
        args.extend(["--input", s(&gold), "--output", s(out), "--quiet"]);
        args.extend(extra);
        run(&args);
        std::fs::read_to_string(out).unwrap()
    };
    let single = parse_to(&[&run_dir], &[], &dir.join("single.trees"));
    let voted = parse_to(
        &[&run_dir, &run_dir, &run_dir],
        &["--combine", "vote"],
        &dir.join("voted.trees"),
    );
    assert_eq!(voted, single);
    let other_data = dir.join("other-data");
    run(&[
        "prepare",
        "--task",
        "parse",
        "--trees",
        s(&train),
        "--vocab-size",
        "48",
        "--out",
        s(&other_data),
    ]);
    let other_run = dir.join("other-run");
    train_tiny(&other_data, &other_run, &[]);
    let e = fail(&[
        "parse",
        "--model",
        s(&run_dir),
        "--model",
        s(&other_run),
        "--input",
        s(&gold),
    ]);
    assert!(e.contains("or let them vote (`--combine vote`)"), "{e}");
    let voted_trees = dir.join("voted.trees");
    parse_to(
        &[&run_dir, &other_run, &focus_dir],
        &["--combine", "vote"],
        &voted_trees,
    );
    let report = run(&["eval", "f1", "--gold", s(&gold), "--test", s(&voted_trees)]);
    assert!(
        report.contains("Number of Valid sentence  =      4"),
        "{report}"
    );

    // `eval ppl --trees` linearizes and encodes the trees as `prepare` does, with the
    // focus rule of the model: it gives the perplexity the trainer recorded for its last
    // step on the same (validation) trees.
    let metrics = std::fs::read_to_string(focus_dir.join("metrics.jsonl")).unwrap();
    let recorded = metrics
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["valid_ppl"].as_f64())
        .next_back()
        .expect("the trainer validated at its last step");
    let report = run(&["eval", "ppl", "--model", s(&focus_dir), "--trees", s(&gold)]);
    let scored: f64 = report
        .strip_prefix("perplexity ")
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{report}"));
    assert!(
        (scored - recorded).abs() < 1e-4 * recorded,
        "eval ppl {scored} vs trainer {recorded}"
    );
    assert!(report.contains("4 pairs"), "{report}");
    // A parsing model on plain sentence pairs is refused, not scored as translation.
    let e = fail(&[
        "eval",
        "ppl",
        "--model",
        s(&focus_dir),
        "--src",
        s(&input),
        "--tgt",
        s(&input),
    ]);
    assert!(
        e.contains("is a parsing model: score it on trees (`eval ppl --trees`)"),
        "{e}"
    );

    // The right-branching baseline, scored by the same evaluator.
    let rb = dir.join("rb.trees");
    run(&[
        "parse",
        "--right-branching",
        "--input",
        s(&gold),
        "--output",
        s(&rb),
    ]);
    let report = run(&["eval", "f1", "--gold", s(&gold), "--test", s(&rb)]);
    assert!(
        report.contains("Number of Valid sentence  =      4"),
        "{report}"
    );
}

/// The bundles shipped in `web/models` load natively and do their task: the translators
/// turn an everyday sentence and a caption into the other language (a word each must hold),
/// the parser gives a tree over exactly the input words.
#[test]
fn shipped_bundles_load_and_run() {
    let models = manifest_dir().join("../../web/models");
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
#[test]
fn nbest_lists_and_scores_agree_with_search_and_perplexity() {
    let model = manifest_dir().join("../../web/models/en-de");
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
    let rerank = manifest_dir().join("../../scripts/rerank.py");
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
        Err(e) => eprintln!("SKIPPED: scripts/rerank.py, no python3 ({e})"),
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
    let models = manifest_dir().join("../../web/models");
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
    let models = manifest_dir().join("../../web/models");
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
    let root = manifest_dir().join("../..");
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
    let root = manifest_dir().join("../..");
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
                println!("SKIP: gpu_decoder_gives_the_cpus_outputs: {stderr}");
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

/// The shipped parser's recorded test score is what it scores: the PTB sample's test trees
/// parsed with the bundle's own decoding settings and scored by `eval f1` give the F1 its
/// `config.json` states (to the printed two decimals).
#[test]
fn shipped_parser_scores_its_recorded_f1() {
    let test_trees = manifest_dir().join("../../../shared/data/ptb-sample/test.trees.gz");
    if !test_trees.exists() {
        println!("SKIP: {} not found", test_trees.display());
        return;
    }
    let bundle = manifest_dir().join("../../web/models/ptb-parser");
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

/// `bench --exchange` writes the start of a side-by-side (`scripts/bench-gpu.sh`): the
/// initial weights under the bundle's names and the batch as I64 ids, BOS/EOS placed as
/// training places them. A run from those weights (`--init`) trains the same model: with
/// dropout 0 on the CPU it ends at the same loss, and a different draw does not.
#[test]
fn bench_exchange_starts_another_run_from_the_same_weights() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("exchange");
    let bench = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec![
            "bench",
            "--preset",
            "tiny",
            "--batch-tokens",
            "260",
            "--steps",
            "2",
            "--dropout",
            "0",
            "--training-only",
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = run(&args);
        serde_json::from_str(out.lines().find(|l| l.starts_with('{')).unwrap()).unwrap()
    };
    let first = bench(&["--exchange", s(&dir)]);
    let again = bench(&["--init", s(&dir.join("init.safetensors"))]);
    assert_eq!(first["final_loss"], again["final_loss"]);
    assert_eq!(first["tokens_per_step"], 10 * 26);
    let batch = std::fs::read(dir.join("batch.safetensors")).unwrap();
    let batch = safetensors::SafeTensors::deserialize(&batch).unwrap();
    let ids = |name: &str| -> Vec<i64> {
        let t = batch.tensor(name).unwrap();
        assert_eq!(t.dtype(), safetensors::Dtype::I64, "{name}");
        t.data()
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    let (src, tgt_in, tgt_out) = (ids("src"), ids("tgt_in"), ids("tgt_out"));
    assert_eq!((src.len(), tgt_in.len(), tgt_out.len()), (250, 260, 260));
    // Row 0: BOS, then the target; the target, then EOS.
    assert_eq!(tgt_in[0], 1);
    assert_eq!(tgt_out[25], 2);
    assert_eq!(tgt_in[1..26], tgt_out[..25]);
    let weights = std::fs::read(dir.join("init.safetensors")).unwrap();
    let weights = safetensors::SafeTensors::deserialize(&weights).unwrap();
    assert!(weights.tensor("embedding.weight").is_ok());
    assert!(
        weights
            .tensor("decoder.layers.0.cross_attn.q.weight")
            .is_ok()
    );
    // Another start ends elsewhere: the comparison can fail.
    std::fs::write(
        dir.join("init.safetensors"),
        transduce::bundle::save_weights(
            &transduce::Transformer::new(
                &transduce::ModelConfig::tiny(),
                &transduce::burn::prelude::Device::flex(),
            )
            .unwrap(),
            transduce::WeightDtype::F32,
        )
        .unwrap(),
    )
    .unwrap();
    let other = bench(&["--init", s(&dir.join("init.safetensors"))]);
    assert_ne!(first["final_loss"], other["final_loss"]);
}

/// The count of cubecl autotunes a `warmup` reports ("tunes N").
fn tunes_reported(out: &str) -> u64 {
    let at = out
        .find("tunes ")
        .unwrap_or_else(|| panic!("no tune count: {out}"));
    out[at + 6..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no tune count: {out}"))
}

/// The GPU cache keeps autotune decisions between processes: `warmup` into a fresh
/// `TRANSDUCE_CACHE_DIR` tunes every kernel of its two shape classes, and the same
/// command in a new process tunes none (counts, not times), from a folder named by the
/// device and the build. Runs on lavapipe in CI; skips where wgpu finds no adapter.
#[test]
fn a_second_gpu_process_skips_every_tune() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let warmup = || {
        bin()
            .env("TRANSDUCE_CACHE_DIR", &cache)
            .env_remove("CUBECL_AUTOTUNE_CACHE")
            .args([
                "warmup",
                "--preset",
                "tiny",
                "--backend",
                "wgpu",
                "--vocab",
                "64",
                "--max-tokens",
                "64",
                "--max-length",
                "6",
            ])
            .output()
            .unwrap()
    };
    let first = warmup();
    let stderr = String::from_utf8_lossy(&first.stderr).to_string();
    if stderr.contains("no usable GPU adapter") {
        println!("SKIP: a_second_gpu_process_skips_every_tune: {stderr}");
        return;
    }
    assert!(first.status.success(), "{stderr}");
    let first = String::from_utf8_lossy(&first.stdout).to_string() + &stderr;
    assert!(first.contains("warmup: 2 shapes"), "{first}");
    let tuned = tunes_reported(&first);
    assert!(tuned > 0, "a fresh cache should tune: {first}");
    let device_dirs: Vec<_> = std::fs::read_dir(cache.join("gpu"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        device_dirs.len() == 1 && device_dirs[0].starts_with("wgpu-"),
        "{device_dirs:?}"
    );
    let second = warmup();
    let out = String::from_utf8_lossy(&second.stdout).to_string()
        + &String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{out}");
    assert_eq!(tunes_reported(&out), 0, "first run tuned {tuned}: {out}");
}

/// `transduce adapt` teaches the shipped de-en a term it gets wrong (tests/fixtures/adapt:
/// "Wien", which it renders "guy", "the woods", …): after 30 steps on 40 pairs, at least 90%
/// of 25 unseen sentences naming Wien say Vienna, where none did. The same seed gives the
/// same weights; the bundle records its adaptation and keeps the shipped int8 storage; the
/// adapted bundle adapts again. Every bad input is one error naming the file and line, and
/// leaves no output.
#[test]
fn adapt_teaches_a_term_and_refuses_bad_pairs() {
    let repo = manifest_dir().join("../..");
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
        hits * 10 >= test.len() * 9,
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
