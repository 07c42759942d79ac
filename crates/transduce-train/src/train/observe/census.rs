//! What a training step costs the host, counted the same way on every backend: kernel
//! launches the host issues, kernels that run, CPU time of the trainer's own threads, and
//! reads back from the device.
//!
//! On a GPU the step is host-bound (docs/BENCHMARKS.md): each launch costs host work in
//! fusion tracing, autodiff bookkeeping and the launch itself, and each read stops the host
//! from running ahead of the device. Times on a software device (lavapipe) mean little;
//! these counts are the same on any machine, so every change to the step is measured by
//! them first.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use burn_cubecl::cubecl::logging::{LaunchObservation, LaunchObserver};

thread_local! {
    /// Device reads the trainer's own code has issued on this thread (each
    /// [`note_read`] is one blocking round trip: `into_data` or a `Transaction`). Per
    /// thread: a census counts the reads of the loop it watches, not of other work in
    /// the process (tests run side by side).
    static READS: Cell<u64> = const { Cell::new(0) };
}

/// Counts one blocking read of device values (one `into_data` or one transaction).
pub fn note_read() {
    READS.with(|r| r.set(r.get() + 1));
}

fn reads() -> u64 {
    READS.with(Cell::get)
}

/// Graph replays issued, and the kernels they ran ([`note_replay`]).
static REPLAYS: AtomicU64 = AtomicU64::new(0);
static REPLAYED_KERNELS: AtomicU64 = AtomicU64::new(0);

/// Counts one replay of a captured graph of `kernels` kernels: one launch for the host,
/// `kernels` that run.
pub fn note_replay(kernels: u64) {
    REPLAYS.fetch_add(1, Ordering::Relaxed);
    REPLAYED_KERNELS.fetch_add(kernels, Ordering::Relaxed);
}

fn replays() -> (u64, u64) {
    (
        REPLAYS.load(Ordering::Relaxed),
        REPLAYED_KERNELS.load(Ordering::Relaxed),
    )
}

/// Kernel launches issued by this process's host threads, by kernel name.
#[derive(Default)]
struct Launches(Mutex<HashMap<&'static str, u64>>);

impl LaunchObserver for Launches {
    fn launched(&self, kernel: &'static str) {
        if let Ok(mut counts) = self.0.lock() {
            *counts.entry(kernel).or_default() += 1;
        }
    }
}

/// Whether a thread is the trainer's own: the main thread, where the trainer, burn's
/// autodiff and tensor API run, or one of cubecl's device-service threads (`DS…`), where
/// fusion, compilation and the launches run. The rest are a driver's (a software
/// device's queue and rasterizer workers, the NVIDIA driver's threads, Mesa's disk cache)
/// or the CPU backend's compute pool: the device's work, not the host's overhead.
fn is_own_thread(tid: &str, name: &str) -> bool {
    tid == std::process::id().to_string() || name.trim().starts_with("DS")
}

/// The threads' CPU time so far (Linux's per-thread `schedstat`; zeros elsewhere): the
/// trainer's own and the others'; and the times the trainer's own threads gave up the CPU
/// to wait (Linux's `voluntary_ctxt_switches`: each a wake-up that found nothing to do, or
/// a blocking wait).
#[derive(Default)]
struct ThreadTimes {
    own: u64,
    other: u64,
    waits: u64,
    /// The trainer's own threads' CPU nanoseconds by name (`main` for the main thread).
    by_name: HashMap<String, u64>,
}

fn thread_times() -> ThreadTimes {
    let mut times = ThreadTimes::default();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return times;
    };
    let main = std::process::id().to_string();
    for task in tasks.flatten() {
        let dir = task.path();
        let Ok(schedstat) = std::fs::read_to_string(dir.join("schedstat")) else {
            continue;
        };
        let ns: u64 = schedstat
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let name = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        let tid = task.file_name().to_string_lossy().to_string();
        if is_own_thread(&tid, &name) {
            times.own += ns;
            let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
            times.waits += status
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|n| n.trim().parse::<u64>().ok())
                .unwrap_or(0);
            let name = match tid == main {
                true => "main".to_string(),
                false => name.trim().to_string(),
            };
            *times.by_name.entry(name).or_default() += ns;
        } else {
            times.other += ns;
        }
    }
    times
}

/// Watches a stretch of training from [`Census::start`] to [`Census::finish`].
pub struct Census {
    launches: Arc<Launches>,
    _observation: LaunchObservation,
    reads: u64,
    replays: (u64, u64),
    /// The threads' CPU time and waits at the start.
    threads: ThreadTimes,
}

/// What a stretch of `steps` optimizer steps cost, per step.
#[derive(Clone, Debug, PartialEq)]
pub struct StepCensus {
    pub steps: u64,
    /// Launches issued by the host per step (a graph replay counts 1).
    pub launches: f64,
    /// Kernels that ran per step: the host's launches, and the kernels of each replayed
    /// graph (as many as its capture recorded).
    pub kernels: f64,
    /// CPU milliseconds per step of the threads running the trainer, burn and cubecl.
    pub host_ms: f64,
    /// CPU milliseconds per step of the other threads: the driver's (a software device's
    /// queue and workers, CUDA's) or the CPU backend's compute pool.
    pub other_ms: f64,
    /// Blocking device reads per step, issued by the thread that took the census.
    pub reads: f64,
    /// Times per step the trainer's threads gave up the CPU to wait.
    pub waits: f64,
    /// Of `host_ms`, what the trainer's threads spent waiting, where the cost of a wait was
    /// measured ([`wait_cost_ns`]): cubecl's device threads wake every 150 µs to look for
    /// work while the device computes, so on a slow device (lavapipe) this part grows with
    /// the step's duration, not with the host's work.
    pub idle_ms: Option<f64>,
    /// `host_ms` by thread: the main thread (`main`) and cubecl's device threads (`DS…`),
    /// most first.
    pub threads: Vec<(String, f64)>,
    /// The kernels launched most, with their launches per step.
    pub top: Vec<(String, f64)>,
}

impl Census {
    /// Starts counting; only one census may watch at a time (the launch hook is
    /// process-wide).
    pub fn start() -> Census {
        let launches = Arc::new(Launches::default());
        let observation = LaunchObservation::new(launches.clone());
        Census {
            launches,
            _observation: observation,
            reads: reads(),
            replays: replays(),
            threads: thread_times(),
        }
    }

    /// Stops counting; the figures are divided by `steps`.
    pub fn finish(self, steps: u64) -> StepCensus {
        let times = thread_times();
        let cpu = (times.own, times.other);
        let waits = times.waits.saturating_sub(self.threads.waits);
        let reads = reads() - self.reads;
        let (replays, replayed) = replays();
        let (replays, replayed) = (replays - self.replays.0, replayed - self.replays.1);
        drop(self._observation);
        let counts = self
            .launches
            .0
            .lock()
            .map(|c| c.clone())
            .unwrap_or_default();
        let per = |n: u64| n as f64 / steps.max(1) as f64;
        let total: u64 = counts.values().sum();
        let mut top: Vec<(String, f64)> = counts
            .iter()
            .map(|(name, &n)| (short_name(name), per(n)))
            .collect();
        top.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        top.truncate(12);
        StepCensus {
            steps,
            launches: per(total + replays),
            kernels: per(total + replayed),
            host_ms: per(cpu.0.saturating_sub(self.threads.own)) / 1e6,
            other_ms: per(cpu.1.saturating_sub(self.threads.other)) / 1e6,
            reads: per(reads),
            waits: per(waits),
            idle_ms: None,
            threads: {
                let mut threads: Vec<(String, f64)> = times
                    .by_name
                    .iter()
                    .map(|(name, &ns)| {
                        let before = self.threads.by_name.get(name).copied().unwrap_or(0);
                        (name.clone(), per(ns.saturating_sub(before)) / 1e6)
                    })
                    .collect();
                threads.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                threads
            },
            top,
        }
    }
}

impl StepCensus {
    /// Estimates the waiting part of the host's time from the CPU cost of one wait
    /// ([`wait_cost_ns`]).
    pub fn with_wait_cost(mut self, ns: f64) -> Self {
        self.idle_ms = Some((ns * self.waits / 1e6).min(self.host_ms));
        self
    }
}

/// CPU nanoseconds the trainer's own threads spend per wait while nothing is asked of
/// them, measured over `window` (call with the device drained): cubecl's device threads
/// spin, yield, then park for at most 150 µs at a time, and each wake-up costs the host
/// CPU time whether or not work came. `None` where waits are not counted (not Linux).
pub fn wait_cost_ns(window: std::time::Duration) -> Option<f64> {
    let before = thread_times();
    std::thread::sleep(window);
    let after = thread_times();
    let waits = after.waits.saturating_sub(before.waits);
    (waits > 0).then(|| after.own.saturating_sub(before.own) as f64 / waits as f64)
}

/// A kernel's name without its module path and generic arguments.
fn short_name(name: &str) -> String {
    let base = name.split('<').next().unwrap_or(name);
    base.rsplit("::").next().unwrap_or(base).to_string()
}

impl std::fmt::Display for StepCensus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "launches/step {:.0}, kernels/step {:.0}, host ms/step {:.1} (",
            self.launches, self.kernels, self.host_ms
        )?;
        if let Some(idle) = self.idle_ms {
            write!(f, "{idle:.1} of it waiting for work, ")?;
        }
        write!(
            f,
            "other threads {:.1}), reads/step {:.2}",
            self.other_ms, self.reads
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_drop_paths_and_generics() {
        assert_eq!(
            short_name("burn_cubecl::kernel::matmul::Kernel<f32, Foo<u32>>"),
            "Kernel"
        );
        assert_eq!(short_name("elemwise_fuse"), "elemwise_fuse");
    }

    #[test]
    fn own_threads_are_told_apart() {
        let main = std::process::id().to_string();
        assert!(is_own_thread(&main, "transduce\n"));
        assert!(is_own_thread("1", "DSD-4-0\n"));
        assert!(!is_own_thread("1", "llvmpipe-0\n"));
        assert!(!is_own_thread("1", "transduce\n"));
    }

    /// The waiting estimate is the waits' count times one wait's cost, never more than the
    /// host's time.
    #[test]
    fn waiting_is_waits_times_their_cost_within_the_host_time() {
        let census = StepCensus {
            steps: 10,
            launches: 6.0,
            kernels: 268.0,
            host_ms: 10.0,
            other_ms: 300.0,
            reads: 0.1,
            waits: 100.0,
            idle_ms: None,
            threads: Vec::new(),
            top: Vec::new(),
        };
        assert_eq!(census.clone().with_wait_cost(50_000.0).idle_ms, Some(5.0));
        assert_eq!(census.clone().with_wait_cost(200_000.0).idle_ms, Some(10.0));
        let shown = census.with_wait_cost(50_000.0).to_string();
        assert!(
            shown.contains("host ms/step 10.0 (5.0 of it waiting for work"),
            "{shown}"
        );
    }

    /// The thread clock moves with work done on this thread, and the census counts this
    /// thread's clock among the others' (a test thread is not the main thread). Compared
    /// against this thread's own clock, not the sum at two moments: other tests' threads
    /// end in between, and the sum can fall.
    #[test]
    fn thread_cpu_time_counts_work() {
        let own = || {
            std::fs::read_to_string("/proc/thread-self/schedstat")
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        };
        let Some(before) = own() else {
            return; // no /proc (not Linux): nothing to count
        };
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
        std::hint::black_box(x);
        // A thread's schedstat clock is brought up to date when it leaves the CPU: on a
        // tickless kernel a thread that never yields can read 0 after seconds of work.
        std::thread::sleep(std::time::Duration::from_millis(2));
        let mine = own().unwrap();
        let after = thread_times();
        assert!(mine > before, "{before} -> {mine}");
        assert!(
            after.other >= mine,
            "others {} < this thread {mine}",
            after.other
        );
    }
}
