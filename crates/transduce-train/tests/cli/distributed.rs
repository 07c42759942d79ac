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
    train_for(data, out, accum, "20", "20")
}

/// `train`'s arguments for a tiny run with dropout of `steps` steps, checkpointing every
/// `every`.
fn train_for<'a>(
    data: &'a Path,
    out: &'a Path,
    accum: &'a str,
    steps: &'a str,
    every: &'a str,
) -> Vec<&'a str> {
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
        steps,
        "--checkpoint-steps",
        every,
        "--keep",
        "100",
        "--log-every",
        "1",
        "--accum",
        accum,
        "--seed",
        "7",
        "--quiet",
    ]
}

/// `mpirun` starting `transduce ARGS` as `ranks` ranks on this machine.
fn mpi_command(mpirun: &Path, ranks: usize, args: &[&str]) -> Command {
    let mut command = Command::new(mpirun);
    command
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
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    command
}

/// `transduce ARGS` as `ranks` MPI ranks on this machine; its output.
fn mpi_run(mpirun: &Path, ranks: usize, args: &[&str]) -> String {
    let out = mpi_command(mpirun, ranks, args).output().unwrap();
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

/// The processes running `transduce` whose command line names `out`, by pid.
fn ranks_of(out: &Path) -> Vec<u32> {
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
            args.first().is_some_and(|a| a.ends_with(b"transduce"))
                && args.contains(&s(out).as_bytes())
        })
        .collect();
    pids.sort();
    pids
}

/// A rank killed mid-run ends the job within 60 s, leaving its checkpoints whole; ranks
/// resumed from the last one train on exactly as an uninterrupted run.
#[test]
fn a_killed_rank_ends_the_job_and_ranks_resume_exactly() {
    let Some(mpirun) = mpirun("a_killed_rank_ends_the_job_and_ranks_resume_exactly") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, _, data) = prepare_toy(dir);
    let (whole, killed) = (dir.join("whole"), dir.join("killed"));
    run(&train_for(&data, &whole, "2", "200", "10"));
    let mut job = mpi_command(&mpirun, 2, &train_for(&data, &killed, "1", "100000", "10"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let first = killed.join("checkpoints/step-00000010");
    let waited = std::time::Instant::now();
    while !first.exists() {
        assert!(
            waited.elapsed().as_secs() < 120,
            "no checkpoint within 120 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let ranks = ranks_of(&killed);
    assert_eq!(ranks.len(), 2, "{ranks:?}");
    let status = Command::new("kill")
        .args(["-9", &ranks[1].to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let killed_at = std::time::Instant::now();
    let exit = loop {
        if let Some(exit) = job.try_wait().unwrap() {
            break exit;
        }
        if killed_at.elapsed().as_secs() >= 60 {
            job.kill().unwrap();
            panic!("the other rank still runs 60 s after one was killed");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(!exit.success());
    assert!(ranks_of(&killed).is_empty(), "a rank outlived the job");
    // Resumed to a step the killed run cannot have reached.
    let last = std::fs::read_dir(killed.join("checkpoints"))
        .unwrap()
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_prefix("step-")?
                .parse::<u64>()
                .ok()
        })
        .max()
        .unwrap();
    assert!(last < 200, "the killed run reached step {last}");
    let out = mpi_run(
        &mpirun,
        2,
        &[
            "train",
            "--out",
            s(&killed),
            "--resume",
            "--max-steps",
            "200",
            "--quiet",
        ],
    );
    assert!(out.contains("resuming from"), "{out}");
    let step = |run: &Path| {
        std::fs::read(run.join("checkpoints/step-00000200/model.safetensors")).unwrap()
    };
    assert!(
        step(&whole) == step(&killed),
        "ranks resumed from step {last} differ from --accum 2 at step 200"
    );
}
