//! Data-parallel ranks started by `mpirun` (issue 78): N ranks on the CPU backend train as
//! one process accumulating N batches (`--accum N`). Skipped, with the reason, where the
//! binary is built without the `mpi` feature or Open MPI's `mpirun` is missing.

use crate::harness::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `mpirun`, if these tests can use it; the reason they are skipped otherwise.
fn mpirun(test: &str) -> Option<PathBuf> {
    if !cfg!(feature = "mpi") {
        println!("SKIP: {test}: built without the `mpi` feature (cargo test --features mpi)");
        return None;
    }
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("mpirun"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        println!("SKIP: {test}: no mpirun on PATH (apt-get install openmpi-bin libopenmpi-dev)");
    }
    found
}

/// `train`'s arguments for a 20-step tiny run with dropout, checkpointing at the end only.
fn train_args<'a>(data: &'a Path, out: &'a Path, accum: &'a str) -> Vec<&'a str> {
    vec![
        "train",
        "--data",
        s(data),
        "--out",
        s(out),
        "--preset",
        "tiny",
        "--dropout",
        "0.1",
        "--label-smoothing",
        "0.1",
        "--max-tokens",
        "300",
        "--warmup",
        "10",
        "--max-steps",
        "20",
        "--checkpoint-steps",
        "20",
        "--log-every",
        "1",
        "--accum",
        accum,
        "--seed",
        "7",
        "--quiet",
    ]
}

/// `transduce ARGS` as `ranks` MPI ranks on this machine; its output.
fn mpi_run(mpirun: &Path, ranks: usize, args: &[&str]) -> String {
    let out = Command::new(mpirun)
        .args([
            "-n",
            &ranks.to_string(),
            "--oversubscribe",
            "--bind-to",
            "none",
        ])
        .arg(env!("CARGO_BIN_EXE_transduce"))
        .args(args)
        // Containers and CI run as root, which mpirun refuses without these.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "mpirun -n {ranks} transduce {args:?} failed:\n{text}"
    );
    text
}

/// The `loss` of each step in a run's `metrics.jsonl`.
fn losses(run: &Path) -> Vec<f64> {
    let text = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    text.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|r| r.get("valid_nll").is_none())
        .filter_map(|r| r["loss"].as_f64())
        .collect()
}

/// A saved tensor's name, dtype, shape and bytes.
type SavedTensor = (String, String, Vec<usize>, Vec<u8>);

/// Adam's state in a checkpoint's `optimizer.bpk`, in a canonical order: each tensor's
/// name, dtype, shape and bytes, then each scalar. burn writes the tensors in the order of
/// a hash map, which differs from process to process; the bytes of each must not.
fn adam_state(checkpoint: &Path) -> (Vec<SavedTensor>, Vec<String>) {
    let bytes = std::fs::read(checkpoint.join("optimizer.bpk")).unwrap();
    let reader = burn_pack::Reader::from_bytes(burn_pack::Bytes::from_bytes_vec(bytes)).unwrap();
    let mut scalars: Vec<String> = reader
        .scalars()
        .iter()
        .map(|(key, value)| format!("{key} = {value:?}"))
        .collect();
    scalars.sort();
    let mut tensors: Vec<_> = reader
        .into_tensors()
        .unwrap()
        .into_iter()
        .map(|t| {
            let (name, dtype, shape, _, bytes) = t.into_parts().unwrap();
            let shape: Vec<usize> = shape.iter().copied().collect();
            (name, format!("{dtype:?}"), shape, bytes.to_vec())
        })
        .collect();
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    (tensors, scalars)
}

/// A checkpoint's state without its wall time.
fn position(checkpoint: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(checkpoint.join("state.json")).unwrap();
    let mut state: serde_json::Value = serde_json::from_str(&text).unwrap();
    state.as_object_mut().unwrap().remove("elapsed_secs");
    state
}

#[test]
fn two_ranks_train_bit_for_bit_like_accumulating_two_batches() {
    let Some(mpirun) = mpirun("two_ranks_train_bit_for_bit_like_accumulating_two_batches") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, _, data) = prepare_toy(dir);
    let (one, two) = (dir.join("accum2"), dir.join("ranks2"));
    run(&train_args(&data, &one, "2"));
    let out = mpi_run(&mpirun, 2, &train_args(&data, &two, "1"));
    assert!(out.contains("rank 1 of 2 (Open MPI"), "{out}");
    let (a, b) = (
        one.join("checkpoints/step-00000020"),
        two.join("checkpoints/step-00000020"),
    );
    let x = std::fs::read(a.join("model.safetensors")).unwrap();
    let y = std::fs::read(b.join("model.safetensors")).unwrap();
    assert!(x == y, "the weights of 2 ranks differ from --accum 2's");
    let ((xt, xs), (yt, ys)) = (adam_state(&a), adam_state(&b));
    assert_eq!(xt.len(), yt.len());
    assert!(!xt.is_empty());
    for (x, y) in xt.iter().zip(&yt) {
        assert!(x == y, "Adam's {}: 2 ranks differ from --accum 2", x.0);
    }
    assert_eq!(xs, ys);
    assert_eq!(position(&a), position(&b));
    let (x, y) = (losses(&one), losses(&two));
    assert_eq!(x.len(), 20, "{x:?}");
    assert_eq!(x, y);
    // Dropout and training moved the loss: the runs compared are not trivially equal.
    assert!(x[19] < x[0], "{x:?}");
}

#[test]
fn four_oversubscribed_ranks_lose_like_accumulating_four_batches() {
    let Some(mpirun) = mpirun("four_oversubscribed_ranks_lose_like_accumulating_four_batches")
    else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, _, data) = prepare_toy(dir);
    let (one, four) = (dir.join("accum4"), dir.join("ranks4"));
    run(&train_args(&data, &one, "4"));
    mpi_run(&mpirun, 4, &train_args(&data, &four, "1"));
    let (x, y) = (losses(&one), losses(&four));
    assert_eq!(x.len(), 20, "{x:?}");
    assert_eq!(y.len(), 20, "{y:?}");
    for (step, (a, b)) in x.iter().zip(&y).enumerate() {
        assert!(
            (a - b).abs() / a.abs() <= 1e-5,
            "step {}: --accum 4 {a}, 4 ranks {b}",
            step + 1
        );
    }
}
