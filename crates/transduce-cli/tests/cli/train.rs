//! `transduce train` end to end: prepare → train → resume → average → translate → export;
//! data-parallel devices, `--init`, graph replay against eager steps, fusion on and off,
//! precision refusals.

use crate::harness::*;
use std::path::{Path, PathBuf};

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
/// `--devices 0,0` starts two ranks, each opening a wgpu device on the first adapter
/// (lavapipe on a machine without a GPU), and trains data-parallel through the whole loop:
/// replayed steps, validation, checkpoint.
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
        transduce_testing::skip(format_args!(
            "data_parallel_training_on_two_wgpu_devices: {stderr}"
        ));
        return;
    }
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("starting ranks 0–1 of 2"), "{stderr}");
    for rank in [
        "rank 0 of 2 (torchrun, local rank 0)",
        "rank 1 of 2 (torchrun, local rank 1)",
    ] {
        assert!(stderr.contains(rank), "{stderr}");
    }
    assert_eq!(stderr.matches("wgpu adapter 0:").count(), 2, "{stderr}");
    assert!(
        stderr.contains("stopped at step 2") && stderr.contains("validation perplexity"),
        "{stderr}"
    );
    // The ranks take the replayed path (their exchange between the gradients and the
    // update), said once, by rank 0.
    assert_eq!(
        stderr
            .matches("on each of 2 ranks: 1 batch, the pack, the exchange and an update a step")
            .count(),
        1,
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
            // The eager step, the path this comparison was written for (wgpu replays by
            // default).
            "--eager",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        let out = bin().args(&args).output().unwrap();
        (out, run_dir)
    };
    let (out, fused) = train("fused", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("no usable GPU adapter") {
        transduce_testing::skip(format_args!(
            "fusion_on_and_off_train_alike_on_wgpu: {stderr}"
        ));
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
fn resume_auto_starts_a_run_or_continues_it_exactly() {
    // What a launcher that restarts a rank runs: the same command each time.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, _, data) = prepare_toy(dir);
    let train = |out_dir: &Path, steps: &str, resume: &[&str]| {
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
        args.extend_from_slice(resume);
        run(&args)
    };
    let whole = dir.join("whole");
    train(&whole, "10", &[]);
    let parts = dir.join("parts");
    let first = train(&parts, "6", &["--resume", "auto"]);
    assert!(
        first.contains("--resume auto: no checkpoint yet: starting a new run"),
        "{first}"
    );
    let second = train(&parts, "10", &["--resume", "auto"]);
    assert!(
        second.contains("--resume auto: a checkpoint is there: resuming"),
        "{second}"
    );
    let weights = |run: &Path, step: &str| {
        std::fs::read(run.join(format!("checkpoints/step-{step}/model.safetensors"))).unwrap()
    };
    assert!(
        weights(&whole, "00000010") == weights(&parts, "00000010"),
        "6 steps then 10 under --resume auto differ from one run of 10"
    );
    // A plain --resume with --init is refused; under auto --init only starts a run.
    let e = fail(&[
        "train",
        "--data",
        s(&data),
        "--out",
        s(&parts),
        "--resume",
        "--init",
        s(&whole),
    ]);
    assert!(
        e.contains("--resume auto, which uses --init only when it starts"),
        "{e}"
    );
}
