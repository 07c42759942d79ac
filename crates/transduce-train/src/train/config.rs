//! Settings of a training run (`TrainOptions`, the paper's defaults) and the `run.json`
//! that rebuilds its model.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use transduce::task::focus::WordFocus;
use transduce::tokenizer::Tokenizer;
use transduce::{ModelConfig, Precision};

use crate::data::shape::Shapes;
use crate::error::{Error, Result, io};

/// Settings of a training run; defaults are the paper's (§5).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainOptions {
    /// Source (and target) tokens per batch, padding included (§5.1: ~25,000).
    pub max_tokens: usize,
    /// Batches whose gradients are summed before one optimizer step.
    pub accum: usize,
    /// warmup_steps of §5.3.
    pub warmup: u64,
    /// Constant factor on the §5.3 learning rate (1.0 = the paper).
    pub lr_factor: f64,
    /// Stop after this many optimizer steps.
    pub max_steps: Option<u64>,
    /// Stop after this many epochs.
    pub max_epochs: Option<u64>,
    /// Stop after this much training time (minutes, across resumes).
    pub max_minutes: Option<f64>,
    /// Checkpoint every this many minutes (§5.2: 10).
    pub checkpoint_minutes: Option<f64>,
    /// Checkpoint every this many steps.
    pub checkpoint_steps: Option<u64>,
    /// Checkpoints kept (averaging needs the last 5 or 20, §6.1).
    pub keep: usize,
    /// Validate every this many steps (0: only at checkpoints).
    pub valid_every: u64,
    /// Seed of initialization, data order and dropout.
    pub seed: u64,
    /// The type activations are computed in ([`transduce::precision`]); weights and Adam stay f32.
    #[serde(default)]
    pub precision: Precision,
    /// Ranks sharing each step (data-parallel processes, [`crate::distributed`]): a step
    /// takes `accum × world` batches. Runs from before ranks existed had one.
    #[serde(default = "one_rank")]
    pub world: usize,
    /// Batch shapes: exact (as long as each batch's longest pair) or padded to a few shape
    /// classes, so that a GPU tunes and compiles for a handful of shapes.
    #[serde(default)]
    pub shapes: Shapes,
}

fn one_rank() -> usize {
    1
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions {
            max_tokens: 25_000,
            accum: 1,
            warmup: 4000,
            lr_factor: 1.0,
            max_steps: None,
            max_epochs: None,
            max_minutes: None,
            checkpoint_minutes: Some(10.0),
            checkpoint_steps: None,
            keep: 20,
            valid_every: 0,
            seed: 1,
            precision: Precision::F32,
            world: 1,
            shapes: Shapes::Exact,
        }
    }
}

/// `run.json`: everything needed to rebuild the model of a run directory.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunConfig {
    pub model: ModelConfig,
    pub options: TrainOptions,
    /// Prepared data directory the run trains on.
    pub data: PathBuf,
    /// The weights the run started from (`train --init`: continued training or
    /// fine-tuning); none for a run from random weights (§5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<PathBuf>,
}

pub const RUN_FILE: &str = "run.json";
/// Steps between reads of the training loss (`train --log-every`).
pub const LOG_EVERY: usize = 10;
pub const METRICS_FILE: &str = "metrics.jsonl";

impl RunConfig {
    pub fn read(run_dir: &Path) -> Result<RunConfig> {
        let path = run_dir.join(RUN_FILE);
        let text = std::fs::read_to_string(&path).map_err(io(&path))?;
        serde_json::from_str(&text).map_err(|e| Error::Format {
            path,
            message: e.to_string(),
        })
    }

    pub fn write(&self, run_dir: &Path) -> Result<()> {
        std::fs::create_dir_all(run_dir).map_err(io(run_dir))?;
        let json = serde_json::to_string_pretty(self).expect("run config serializes");
        crate::fsutil::write_atomic(&run_dir.join(RUN_FILE), json.as_bytes())
    }
}

/// The word-focus rule a model needs (from its vocabulary), `None` for other models.
pub fn focus_rule(config: &ModelConfig, tokenizer: &Tokenizer) -> Result<Option<WordFocus>> {
    if !config.word_focus {
        return Ok(None);
    }
    WordFocus::from_vocab(&tokenizer.id_strings(config.vocab_size))
        .map(Some)
        .ok_or_else(|| {
            Error::Usage(
                "word focus needs a parsing vocabulary (one with the XX slot token): \
                 prepare the data with --task parse"
                    .into(),
            )
        })
}
