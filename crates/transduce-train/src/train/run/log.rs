//! A run's log: `metrics.jsonl` (rank 0's; the other ranks' records go nowhere), the
//! progress bar, and the steps whose losses are still on the device ([`super::pending`]).

use std::io::Write;
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};

use super::pending::{PendingStep, PendingSteps};
use crate::error::{Result, io};
use crate::train::config::METRICS_FILE;
use crate::train::engine::loss_scale::LossScale;

pub(super) struct RunLog {
    pub bar: ProgressBar,
    file: std::fs::File,
    path: PathBuf,
    pending: PendingSteps,
    /// Read the losses back every this many steps, all in one transaction.
    every: usize,
}

impl RunLog {
    /// Appends to `run_dir`'s `metrics.jsonl` on rank 0 (`lead`), with a bar on stderr
    /// where `progress` asks for one, at `step` of `max_steps`.
    pub fn open(
        run_dir: &Path,
        lead: bool,
        progress: bool,
        (step, max_steps): (u64, Option<u64>),
        every: usize,
    ) -> Result<Self> {
        let path = run_dir.join(METRICS_FILE);
        // Only rank 0 writes the log; the other ranks' pending steps are never read.
        let target = if lead {
            path.clone()
        } else {
            PathBuf::from("/dev/null")
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&target)
            .map_err(io(&target))?;
        let bar = if progress && lead {
            let bar = match max_steps {
                Some(n) => ProgressBar::new(n),
                None => ProgressBar::no_length(),
            };
            bar.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:30}] step {pos}/{len} eta {eta} {msg}",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            bar.set_position(step);
            bar
        } else {
            ProgressBar::hidden()
        };
        Ok(RunLog {
            bar,
            file,
            path,
            pending: PendingSteps::default(),
            every: every.max(1),
        })
    }

    /// A step whose record waits for its loss.
    pub fn push(&mut self, step: PendingStep) {
        self.pending.push(step);
    }

    /// Whether enough steps wait to read their losses back.
    pub fn due(&self) -> bool {
        self.pending.len() >= self.every
    }

    /// Reads the waiting losses and appends their records ([`PendingSteps::flush`]).
    pub fn flush(&mut self, loss_scale: &mut Option<LossScale>) -> Result<()> {
        self.pending
            .flush(&self.bar, &mut self.file, &self.path, loss_scale)
    }

    /// Appends one record known on the host (a validation's).
    pub fn write(&mut self, record: &serde_json::Value) -> Result<()> {
        writeln!(self.file, "{record}").map_err(io(&self.path))
    }
}
