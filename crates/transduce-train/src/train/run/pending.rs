//! Steps whose losses are still on the device: their `metrics.jsonl` records wait until
//! the losses of several steps are read together.

use std::io::Write;
use std::path::Path;

use indicatif::ProgressBar;
use transduce::burn::prelude::*;

use crate::error::{Result, io};
use crate::train::engine::eager::StepLoss;
use crate::train::engine::loss_scale::LossScale;
use crate::train::read::read_scalars;

/// A step whose loss is still on the device: its `metrics.jsonl` record waits for it.
pub struct PendingStep {
    pub record: serde_json::Value,
    pub loss: StepLoss,
    pub tokens: usize,
    /// A graph step's loss scale after it, on the device: scale, clean steps, skipped
    /// steps (an eager step's is known on the host and already in `record`).
    pub scale: Option<[Tensor<1>; 3]>,
}

/// Steps not yet logged. Reading each step's loss as it comes would make the host wait
/// for the device every step; read together, the host runs up to `log_every` steps ahead.
#[derive(Default)]
pub struct PendingSteps(Vec<PendingStep>);

impl PendingSteps {
    pub fn push(&mut self, step: PendingStep) {
        self.0.push(step);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Reads every pending loss in one transaction and appends the steps' records. A
    /// graph step's loss scale comes back in the same read, into its record and into
    /// `loss_scale` (what a checkpoint saves).
    pub fn flush(
        &mut self,
        bar: &ProgressBar,
        metrics: &mut std::fs::File,
        metrics_path: &Path,
        loss_scale: &mut Option<LossScale>,
    ) -> Result<()> {
        let steps = std::mem::take(&mut self.0);
        let mut tensors = Vec::new();
        for step in &steps {
            tensors.extend([step.loss.smoothed.clone(), step.loss.nll.clone()]);
            tensors.extend(step.scale.iter().flatten().cloned());
        }
        let values = read_scalars(tensors)?;
        let mut values = values.into_iter();
        let mut lines = String::new();
        for step in steps {
            let mut next = || values.next().unwrap_or(f64::NAN);
            let (loss, nll) = (next(), next());
            let ppl = (nll / step.tokens as f64).exp();
            let mut record = step.record;
            if step.scale.is_some() {
                let (scale, clean, skipped) = (next(), next(), next());
                let state = LossScale {
                    scale,
                    clean_steps: clean as u64,
                    skipped: skipped as u64,
                };
                record["loss_scale"] = state.scale.into();
                record["skipped_steps"] = state.skipped.into();
                *loss_scale = Some(state);
            }
            record["loss"] = loss.into();
            record["ppl"] = ppl.into();
            bar.set_position(record["step"].as_u64().unwrap_or(0));
            bar.set_message(format!(
                "loss {loss:.3} ppl {ppl:.2} lr {:.2e} {:.0} tok/s epoch {}",
                record["lr"].as_f64().unwrap_or(0.0),
                record["tokens_per_sec"].as_f64().unwrap_or(0.0),
                record["epoch"]
            ));
            lines.push_str(&record.to_string());
            lines.push('\n');
        }
        metrics
            .write_all(lines.as_bytes())
            .map_err(io(metrics_path))
    }
}
