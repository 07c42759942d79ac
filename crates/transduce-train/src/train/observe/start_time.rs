//! The start of a run: what a process spends before it trains at its steady rate.
//!
//! On a GPU the first steps of a run autotune (time every candidate kernel of a new
//! shape) and compile kernels; a run with many batch shapes keeps doing so for minutes.
//! This watches it: seconds to load, autotunes (by tuner), distinct kernels compiled,
//! seconds to the first step, and when the steady rate began: the first window of
//! [`WINDOW`] steps whose mean step time is within 5% of the run's median.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Instant;

use burn_cubecl::cubecl::launched::LaunchedKernels;

/// Steps in the window the steady rate is judged on.
pub const WINDOW: usize = 20;

/// Autotunes started in this process, by the tuner's key type (cubecl logs one line,
/// `Tuning <key>`, on every tune-cache miss: the only public trace of a tune).
static TUNES: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

/// Counts cubecl's `Tuning …` log lines; logs nothing.
struct TuneCounter;

impl log::Log for TuneCounter {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.target().starts_with("cubecl_runtime::tune")
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let line = record.args().to_string();
        let Some(key) = line.strip_prefix("Tuning ") else {
            return;
        };
        // A key displays as "<KeyType> - <fields>" or "<KeyType> { <fields> }".
        let tuner = key
            .split([' ', '{', '('])
            .next()
            .unwrap_or(key)
            .trim()
            .to_string();
        if let Ok(mut tunes) = TUNES.lock() {
            *tunes.entry(tuner).or_default() += 1;
        }
    }

    fn flush(&self) {}
}

/// Installs the tune counter as the process's logger (once; the binary has no other).
pub fn count_tunes() {
    static COUNTER: TuneCounter = TuneCounter;
    if log::set_logger(&COUNTER).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
}

/// Autotunes so far in this process, by tuner.
pub fn tunes() -> BTreeMap<String, u64> {
    TUNES.lock().map(|t| t.clone()).unwrap_or_default()
}

/// Watches a run's start, from the process's first work to its steady rate.
pub struct StartWatch {
    began: Instant,
    /// Tunes by tuner when the watch began.
    tunes_before: BTreeMap<String, u64>,
    kernels: LaunchedKernels,
    loaded_secs: Option<f64>,
    /// Seconds since `began` at the end of each step.
    step_ends: Vec<f64>,
}

/// What the start cost.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct StartReport {
    pub loaded_secs: f64,
    pub first_step_secs: f64,
    pub tunes: u64,
    pub tunes_by_tuner: BTreeMap<String, u64>,
    /// Distinct kernels launched (with WGSL and CUDA, each compiled once per process).
    pub compiled: usize,
    /// Median step time (seconds) of the steps watched.
    pub median_step_secs: f64,
    /// The steady rate's first step (1-based) and its time since the start, if reached.
    pub steady_from_step: Option<usize>,
    pub steady_secs: Option<f64>,
    /// Seconds from the start to the end of the 20th step, if the run had one.
    pub step20_secs: Option<f64>,
    /// Where autotune decisions and compiled kernels persist (GPU backends).
    pub cache: Option<String>,
}

impl StartWatch {
    /// Starts the clock and the counts; call before loading anything.
    pub fn begin() -> StartWatch {
        count_tunes();
        StartWatch {
            began: Instant::now(),
            tunes_before: tunes(),
            kernels: LaunchedKernels::new(),
            loaded_secs: None,
            step_ends: Vec::new(),
        }
    }

    /// The model, data and optimizer are loaded.
    pub fn loaded(&mut self) {
        self.loaded_secs = Some(self.began.elapsed().as_secs_f64());
    }

    /// A step has ended (its work issued; the device may still be running it).
    pub fn step(&mut self) {
        self.step_ends.push(self.began.elapsed().as_secs_f64());
    }

    /// What the start cost; compiled kernels are counted up to now.
    pub fn report(self) -> StartReport {
        let compiled = self.kernels.finish().len();
        let by_tuner: BTreeMap<String, u64> = tunes()
            .into_iter()
            .map(|(k, n)| {
                let before = self.tunes_before.get(&k).copied().unwrap_or(0);
                (k, n - before)
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        let tunes: u64 = by_tuner.values().sum();
        let loaded_secs = self.loaded_secs.unwrap_or(0.0);
        let times: Vec<f64> = self
            .step_ends
            .iter()
            .scan(loaded_secs, |last, &end| {
                let dt = end - *last;
                *last = end;
                Some(dt)
            })
            .collect();
        let (steady_from_step, median_step_secs) = steady_start(&times);
        StartReport {
            loaded_secs,
            first_step_secs: self.step_ends.first().copied().unwrap_or(0.0),
            tunes,
            tunes_by_tuner: by_tuner,
            compiled,
            median_step_secs,
            steady_from_step,
            steady_secs: steady_from_step.map(|s| self.step_ends[s - 1]),
            step20_secs: self.step_ends.get(19).copied(),
            cache: crate::backend::cache::placement().map(|p| p.to_string()),
        }
    }
}

/// The first step (1-based) of the first window of [`WINDOW`] steps whose mean is within
/// 5% of the median step time, and that median.
pub fn steady_start(times: &[f64]) -> (Option<usize>, f64) {
    if times.is_empty() {
        return (None, 0.0);
    }
    let mut sorted = times.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    if times.len() < WINDOW {
        return (None, median);
    }
    let first = times.windows(WINDOW).position(|w| {
        let mean = w.iter().sum::<f64>() / WINDOW as f64;
        (mean - median).abs() <= 0.05 * median
    });
    (first.map(|i| i + 1), median)
}

impl StartReport {
    /// `tunes N (n1 Tuner1, n2 Tuner2, …)`.
    pub fn tunes_line(&self) -> String {
        if self.tunes_by_tuner.is_empty() {
            return format!("tunes {}", self.tunes);
        }
        let by: Vec<String> = self
            .tunes_by_tuner
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        format!("tunes {} ({})", self.tunes, by.join(", "))
    }
}

impl std::fmt::Display for StartReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "loaded {:.1} s, first step {:.1} s, {}, compiled {} kernels",
            self.loaded_secs,
            self.first_step_secs,
            self.tunes_line(),
            self.compiled
        )?;
        match (self.steady_from_step, self.steady_secs) {
            (Some(step), Some(secs)) => write!(
                f,
                ", steady rate from step {step} ({secs:.1} s; median step {:.1} ms)",
                1e3 * self.median_step_secs
            ),
            _ => write!(
                f,
                ", steady rate not reached (needs {WINDOW} steps near the median {:.1} ms)",
                1e3 * self.median_step_secs
            ),
        }?;
        match &self.cache {
            Some(cache) => write!(f, "; GPU cache {cache}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_rate_begins_after_the_slow_steps() {
        // Five slow first steps (tuning, compiling), then a steady 10 ms with noise.
        let mut times = vec![3.0, 1.5, 0.8, 0.2, 0.05];
        times.extend((0..60).map(|i| 0.010 + 0.0002 * ((i % 3) as f64 - 1.0)));
        let (from, median) = steady_start(&times);
        assert!((median - 0.010).abs() < 1e-3, "{median}");
        // The first window without any slow step starts at step 6.
        assert_eq!(from, Some(6));
        assert_eq!(steady_start(&times[..10]).0, None);
    }

    #[test]
    fn tunes_are_counted_from_cubecl_log_lines() {
        count_tunes();
        let before = tunes().get("TestKey").copied().unwrap_or(0);
        log::info!(target: "cubecl_runtime::tune::tuner", "Tuning TestKey - m: 64, n: 64");
        log::info!(target: "wgpu_core", "Tuning TestKey - not cubecl's");
        log::info!(target: "cubecl_runtime::tune::tuner", "Tuning OtherKey {{ length: 5 }}");
        assert_eq!(tunes().get("OtherKey").copied().unwrap_or(0), 1);
        assert_eq!(tunes().get("TestKey").copied().unwrap_or(0), before + 1);
    }
}
