//! Data-parallel ranks: N ranks on the CPU backend train as one process
//! accumulating N batches (`--accum N`), whether `train --nproc-per-node N` starts them
//! (they meet over TCP) or `mpirun` does (MPI). The MPI cases are skipped, with the reason,
//! where Open MPI's `mpirun` is missing.

use crate::harness::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// What starts a job's ranks.
#[derive(Clone, Debug)]
enum Launcher {
    /// `transduce train --nproc-per-node N`: the ranks meet over TCP.
    Local,
    /// `mpirun -n N transduce train`: Open MPI.
    Mpi(PathBuf),
    /// `mpiexec.mpich -n N transduce train`: MPICH, whose handles are integers where Open
    /// MPI's are addresses (the other ABI `src/distributed/mpi.rs` speaks).
    Mpich(PathBuf),
}

/// The launchers these tests can use: always `--nproc-per-node`, and `mpirun` where the
/// build has MPI and Open MPI is installed (the reason is printed where not).
fn launchers(test: &str) -> Vec<Launcher> {
    let mut found = vec![Launcher::Local];
    found.extend(mpirun(test).map(Launcher::Mpi));
    found
}

/// The program `name` in a folder of PATH, if one has it.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

/// MPICH's `mpiexec`, if these tests can use it; the reason they are skipped otherwise.
fn mpich(test: &str) -> Option<PathBuf> {
    let found = on_path("mpiexec.mpich");
    if found.is_none() {
        transduce_testing::skip_part(format_args!(
            "{test} through MPICH: no mpiexec.mpich on PATH (apt-get install mpich)"
        ));
    }
    found
}

/// `mpirun`, if these tests can use it; the reason they are skipped otherwise.
fn mpirun(test: &str) -> Option<PathBuf> {
    let found = on_path("mpirun");
    if found.is_none() {
        transduce_testing::skip(format_args!(
            "{test} through MPI: no mpirun on PATH (apt-get install openmpi-bin)"
        ));
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

/// `launcher` starting `transduce ARGS` as `ranks` ranks on this machine.
fn ranks_command(launcher: &Launcher, ranks: usize, args: &[&str]) -> Command {
    match launcher {
        Launcher::Local => {
            let mut command = bin();
            command
                .args(args)
                .args(["--nproc-per-node", &ranks.to_string()]);
            command
        }
        Launcher::Mpi(mpirun) => {
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
        Launcher::Mpich(mpiexec) => {
            let mut command = Command::new(mpiexec);
            command
                .args(["-n", &ranks.to_string()])
                .arg(env!("CARGO_BIN_EXE_transduce"))
                .args(args);
            command
        }
    }
}

/// `transduce ARGS` as `ranks` ranks on this machine; its output.
fn ranks_run(launcher: &Launcher, ranks: usize, args: &[&str]) -> String {
    ranks_run_with(launcher, ranks, args, &[])
}

/// [`ranks_run`] with these variables set.
fn ranks_run_with(
    launcher: &Launcher,
    ranks: usize,
    args: &[&str],
    vars: &[(&str, &str)],
) -> String {
    let mut command = ranks_command(launcher, ranks, args);
    command.envs(vars.iter().copied());
    let out = command.output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{launcher:?} with {ranks} ranks of transduce {args:?} failed:\n{text}"
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

/// Two checkpoints hold the same bits: weights, Adam's state and position.
fn assert_same_checkpoint(a: &Path, b: &Path, what: &str) {
    let x = std::fs::read(a.join("model.safetensors")).unwrap();
    let y = std::fs::read(b.join("model.safetensors")).unwrap();
    assert!(x == y, "{what}: the weights differ");
    let ((xt, xs), (yt, ys)) = (adam_state(a), adam_state(b));
    assert_eq!(xt.len(), yt.len());
    assert!(!xt.is_empty());
    for (x, y) in xt.iter().zip(&yt) {
        assert!(x == y, "{what}: Adam's {} differs", x.0);
    }
    assert_eq!(xs, ys, "{what}");
    assert_eq!(position(a), position(b), "{what}");
}

#[test]
fn two_ranks_train_bit_for_bit_like_accumulating_two_batches() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, _, data) = prepare_toy(dir);
    let one = dir.join("accum2");
    run(&train_args(&data, &one, "2"));
    let x = losses(&one);
    assert_eq!(x.len(), 20, "{x:?}");
    // Dropout and training moved the loss: the runs compared are not trivially equal.
    assert!(x[19] < x[0], "{x:?}");
    let mut launchers = launchers("two_ranks_train_bit_for_bit");
    launchers.extend(mpich("two_ranks_train_bit_for_bit").map(Launcher::Mpich));
    for (n, launcher) in launchers.iter().enumerate() {
        let two = dir.join(format!("ranks2-{n}"));
        // Through MPI, in pieces of 1,000 elements (MPI's counts are 32-bit: past 2³¹ − 1
        // elements a buffer must go in pieces, and this makes every message do so).
        let pieces = [("TRANSDUCE_MPI_CHUNK", "1000")];
        let out = ranks_run_with(launcher, 2, &train_args(&data, &two, "1"), &pieces);
        let named = match launcher {
            Launcher::Local => "rank 1 of 2 (torchrun",
            Launcher::Mpi(_) => "rank 1 of 2 (Open MPI",
            Launcher::Mpich(_) => "rank 1 of 2 (MPICH's mpiexec",
        };
        assert!(out.contains(named), "{out}");
        assert_same_checkpoint(
            &one.join("checkpoints/step-00000020"),
            &two.join("checkpoints/step-00000020"),
            &format!("2 ranks ({launcher:?}) against --accum 2"),
        );
        assert_eq!(x, losses(&two), "{launcher:?}");
    }
}

#[test]
fn four_oversubscribed_ranks_lose_like_accumulating_four_batches() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, _, data) = prepare_toy(dir);
    let one = dir.join("accum4");
    run(&train_args(&data, &one, "4"));
    let x = losses(&one);
    assert_eq!(x.len(), 20, "{x:?}");
    for (n, launcher) in launchers("four_oversubscribed_ranks").iter().enumerate() {
        let four = dir.join(format!("ranks4-{n}"));
        ranks_run(launcher, 4, &train_args(&data, &four, "1"));
        let y = losses(&four);
        assert_eq!(y.len(), 20, "{launcher:?}: {y:?}");
        for (step, (a, b)) in x.iter().zip(&y).enumerate() {
            assert!(
                (a - b).abs() / a.abs() <= 1e-5,
                "step {}: --accum 4 {a}, 4 ranks ({launcher:?}) {b}",
                step + 1
            );
        }
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

/// The newest checkpoint's step of a run.
fn last_step(run: &Path) -> u64 {
    std::fs::read_dir(run.join("checkpoints"))
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
        .unwrap()
}

/// How a test ends a rank mid-run.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// SIGKILL: the rank is gone, its connections close.
    Kill,
    /// SIGSTOP: the rank is alive but silent, until the others' collective timeout.
    Stop,
}

/// The collective timeout of the runs a rank is stopped in (`--collective-timeout`).
const TIMEOUT_S: u64 = 5;

/// Ends rank 1 of `job` (training into `out`, its stderr in `log`) by `fault` once its
/// first checkpoint is written. The job must end, unsuccessfully, leaving no rank behind:
/// a killed rank's within 60 s, a stopped one's within the collective timeout + 10 s,
/// with a line that says a rank is silent.
fn end_a_rank(mut job: Child, out: &Path, log: &Path, fault: Fault) {
    let first = out.join("checkpoints/step-00000010");
    let waited = Instant::now();
    while !first.exists() {
        assert!(
            waited.elapsed().as_secs() < 120,
            "no checkpoint within 120 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The ranks, not `--nproc-per-node`'s starter (the job itself here).
    let ranks: Vec<u32> = ranks_of(out)
        .into_iter()
        .filter(|&p| p != job.id())
        .collect();
    assert_eq!(ranks.len(), 2, "{ranks:?}");
    let (signal, bound) = match fault {
        Fault::Kill => ("-KILL", 60),
        Fault::Stop => ("-STOP", TIMEOUT_S + 10),
    };
    let status = Command::new("kill")
        .args([signal, &ranks[1].to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let ended_at = Instant::now();
    let exit = loop {
        if let Some(exit) = job.try_wait().unwrap() {
            break exit;
        }
        if ended_at.elapsed().as_secs() >= bound {
            job.kill().unwrap();
            for pid in ranks_of(out) {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
            panic!("{fault:?}: the job still runs {bound} s after rank 1 was ended");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let after = ended_at.elapsed();
    let left = ranks_of(out);
    for pid in &left {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert!(!exit.success());
    assert!(left.is_empty(), "{fault:?}: a rank outlived the job");
    if let Fault::Stop = fault {
        let text = std::fs::read_to_string(log).unwrap();
        let said: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("alive but silent"))
            .collect();
        assert!(
            !said.is_empty()
                && said
                    .iter()
                    .all(|l| l.contains(&format!("waited {TIMEOUT_S} s"))),
            "{fault:?}, {after:?} after:\n{text}"
        );
        // Over TCP the line names the silent rank.
        assert!(
            text.contains("mpirun")
                || text.contains("MPI")
                || said.iter().all(|l| l.contains("for rank 1 ")),
            "{text}"
        );
    }
}

/// A rank killed (SIGKILL) or stopped (SIGSTOP: alive, silent) mid-run ends the job, within
/// 60 s or the collective timeout + 10 s, leaving its checkpoints whole; the run resumed
/// from the last one trains on exactly as an uninterrupted run: by the same command again
/// (`--resume auto`, as a launcher's loop restarts a job), by as many ranks under MPI, or by
/// one process, which takes `--accum 2` to keep the 2 batches a step.
#[test]
fn a_killed_or_stopped_rank_ends_the_job_and_the_run_resumes_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, _, data) = prepare_toy(dir);
    let whole = dir.join("whole");
    run(&train_for(&data, &whole, "2", "200", "10"));
    let timeout = TIMEOUT_S.to_string();
    let cases = launchers("a_killed_or_stopped_rank_ends_the_job")
        .into_iter()
        .flat_map(|l| [(l.clone(), Fault::Kill), (l, Fault::Stop)]);
    for (n, (launcher, fault)) in cases.enumerate() {
        let ended = dir.join(format!("ended-{n}"));
        let log = dir.join(format!("ended-{n}.log"));
        let mut args = train_for(&data, &ended, "1", "100000", "10");
        args.extend(["--collective-timeout", &timeout, "--resume", "auto"]);
        let job = ranks_command(&launcher, 2, &args)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        end_a_rank(job, &ended, &log, fault);
        // Resumed to a step the ended run cannot have reached.
        let last = last_step(&ended);
        assert!(last < 200, "the ended run reached step {last}");
        let resume = [
            "train",
            "--out",
            s(&ended),
            "--resume",
            "--max-steps",
            "200",
            "--quiet",
        ];
        let out = match (&launcher, fault) {
            (Launcher::Local, Fault::Kill) => {
                // The job's own command again, to step 200.
                let mut again = train_for(&data, &ended, "1", "200", "10");
                again.extend(["--resume", "auto"]);
                ranks_run(&launcher, 2, &again)
            }
            (Launcher::Local, Fault::Stop) => {
                let out = run(&resume);
                assert!(
                    out.contains(
                        "resuming a run of 2 rank(s) × --accum 1 as 1 rank(s) × --accum 2"
                    ),
                    "{out}"
                );
                out
            }
            (Launcher::Mpi(_) | Launcher::Mpich(_), _) => ranks_run(&launcher, 2, &resume),
        };
        assert!(out.contains("resuming from"), "{out}");
        let step = |run: &Path| {
            std::fs::read(run.join("checkpoints/step-00000200/model.safetensors")).unwrap()
        };
        assert!(
            step(&whole) == step(&ended),
            "{launcher:?}, {fault:?}: resumed from step {last}, the run differs from --accum 2 at step 200"
        );
    }
}

/// A run resumed by a number of ranks that cannot share its batches is refused in one line.
#[test]
fn ranks_that_cannot_share_a_steps_batches_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, _, data) = prepare_toy(dir);
    let out = dir.join("run");
    run(&train_for(&data, &out, "2", "2", "2"));
    let resume = [
        "train",
        "--out",
        s(&out),
        "--resume",
        "--max-steps",
        "4",
        "--quiet",
    ];
    let text = {
        let output = ranks_command(&Launcher::Local, 3, &resume)
            .output()
            .unwrap();
        assert!(!output.status.success());
        String::from_utf8_lossy(&output.stderr).to_string()
    };
    assert!(
        text.contains("this run takes 2 batches a step (1 rank(s) × --accum 2); 3 ranks cannot share them evenly"),
        "{text}"
    );
    assert_eq!(last_step(&out), 2, "a refused resume trained");
}

#[test]
fn several_machines_without_nccl_or_mpi_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, _, data) = prepare_toy(tmp.path());
    let e = fail(&[
        "train",
        "--data",
        s(&data),
        "--out",
        s(&tmp.path().join("run")),
        "--preset",
        "tiny",
        "--nnodes",
        "2",
        "--node-rank",
        "0",
        "--nproc-per-node",
        "1",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        "29999",
    ]);
    assert!(
        e.contains("--nnodes 2: across machines the gradients go through NCCL")
            && e.contains("mpirun")
            && e.contains("apt-get install openmpi-bin"),
        "{e}"
    );
    assert_eq!(
        e.lines().filter(|l| l.starts_with("error")).count(),
        1,
        "{e}"
    );
}

/// `torchrun`, if these tests can use it (`TRANSDUCE_TORCHRUN`, or one on PATH); the
/// reason they are skipped otherwise. PyTorch is not installed for CI: with its CUDA
/// libraries it is about 6 GB.
fn torchrun(test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("TRANSDUCE_TORCHRUN")
        .map(PathBuf::from)
        .or_else(|| on_path("torchrun"));
    if found.is_none() {
        transduce_testing::skip(format_args!(
            "{test}: no torchrun (pip install torch, or TRANSDUCE_TORCHRUN=/path/to/torchrun; PyTorch is not installed in CI, ~6 GB)"
        ));
    }
    found
}

/// `torchrun --standalone --nproc-per-node N [EXTRA] transduce ARGS`.
fn torchrun_command(torchrun: &Path, ranks: usize, extra: &[&str], args: &[&str]) -> Command {
    let mut command = Command::new(torchrun);
    command
        .args(["--standalone", "--nproc-per-node", &ranks.to_string()])
        .args(extra)
        .args(["--no-python", env!("CARGO_BIN_EXE_transduce")])
        .args(args)
        // Its workers would each take every core.
        .env("OMP_NUM_THREADS", "1");
    command
}

/// Ranks torchrun starts meet through its agent's store (rank 0's port, which the kernel
/// chose, read there: no port is guessed) and train as one process accumulating their
/// batches.
#[test]
fn torchrun_ranks_meet_through_its_store_and_train_like_accumulating_two_batches() {
    let Some(torchrun) = torchrun("torchrun_ranks_meet_through_its_store") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, _, data) = prepare_toy(dir);
    let one = dir.join("accum2");
    run(&train_args(&data, &one, "2"));
    let two = dir.join("torchrun");
    let out = torchrun_command(&torchrun, 2, &[], &train_args(&data, &two, "1"))
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("rank 1 of 2 (torchrun"), "{text}");
    assert_same_checkpoint(
        &one.join("checkpoints/step-00000020"),
        &two.join("checkpoints/step-00000020"),
        "2 ranks (torchrun) against --accum 2",
    );
}

/// torchrun restarts the job after a rank is killed (`--max-restarts 1`); the same
/// command, with `--resume auto`, continues from the last checkpoint and ends as an
/// uninterrupted run does, bit for bit.
#[test]
fn a_job_torchrun_restarts_after_a_killed_rank_continues_exactly() {
    let Some(torchrun) = torchrun("a_job_torchrun_restarts") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_, _, data) = prepare_toy(dir);
    let whole = dir.join("whole");
    run(&train_for(&data, &whole, "2", "120", "10"));
    let restarted = dir.join("restarted");
    let mut args = train_for(&data, &restarted, "1", "120", "10");
    args.extend(["--resume", "auto"]);
    let log = dir.join("torchrun.log");
    let mut job = torchrun_command(&torchrun, 2, &["--max-restarts", "1"], &args)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let first = restarted.join("checkpoints/step-00000010");
    let waited = Instant::now();
    while !first.exists() {
        assert!(
            waited.elapsed().as_secs() < 120,
            "no checkpoint within 120 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let ranks = ranks_of(&restarted);
    assert_eq!(ranks.len(), 2, "{ranks:?}");
    let killed = Command::new("kill")
        .args(["-KILL", &ranks[1].to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let exit = loop {
        if let Some(exit) = job.try_wait().unwrap() {
            break exit;
        }
        if waited.elapsed().as_secs() >= 600 {
            job.kill().unwrap();
            panic!("the restarted job did not end within 600 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(exit.success(), "{text}");
    assert!(
        text.contains("restart 1 of this job (torchrun, TORCHELASTIC_RESTART_COUNT)"),
        "{text}"
    );
    assert!(text.contains("resuming from"), "{text}");
    let step = |run: &Path| {
        std::fs::read(run.join("checkpoints/step-00000120/model.safetensors")).unwrap()
    };
    assert!(
        step(&whole) == step(&restarted),
        "the restarted run differs from --accum 2 at step 120"
    );
}
