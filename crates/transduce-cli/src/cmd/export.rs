//! `transduce export`: write a bundle (config.json, tokenizer.json, model.safetensors).

use std::path::PathBuf;

use clap::Args;
use transduce::Task;
use transduce::bundle::{CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE, WeightDtype};

use super::{ModelArgs, TaskKind};
use crate::options;
use transduce_train::error::{Error, Result, io};
use transduce_train::{fsutil, model_folder};

#[derive(Args)]
pub struct ExportCmd {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Output bundle folder.
    #[arg(long)]
    pub out: PathBuf,
    /// Store weights in half precision (half the size).
    #[arg(long, conflicts_with = "int8")]
    f16: bool,
    /// Store the matrices (linear weights, embeddings) in int8 with a scale per row, the
    /// rest in f32 (about a quarter of f32's size). The CPU decoder then multiplies in int8.
    #[arg(long)]
    int8: bool,
    /// What the model does (a run folder does not say).
    #[arg(long, value_enum, default_value = "translate")]
    pub task: TaskKind,
    /// Source language code (translation).
    #[arg(long, default_value = "en")]
    pub source: String,
    /// Target language code (translation).
    #[arg(long, default_value = "de")]
    pub target: String,
    /// A metric to record in config.json, as key=value (repeatable).
    #[arg(long = "metric")]
    pub metrics: Vec<String>,
    /// A command to record in the provenance (repeatable).
    #[arg(long = "command")]
    pub commands: Vec<String>,
    /// Optimizer steps to record in the provenance, when the run folder is not where the
    /// weights were trained (e.g. a run trained and averaged on a GPU machine, its averaged
    /// weights and metrics copied back). Default: the run's newest checkpoint.
    #[arg(long)]
    pub steps: Option<u64>,
    /// Training time in seconds to record with --steps (default: the newest checkpoint's).
    #[arg(long, value_parser = options::non_negative)]
    pub training_seconds: Option<f64>,
    /// Default beam size stored in the bundle (default: the task's, §6.1/§6.3).
    #[arg(long, value_parser = options::beam)]
    pub beam: Option<usize>,
    /// Default length penalty α stored in the bundle, e.g. one chosen on the dev set as
    /// §6.1 chose 0.6 (default: the task's).
    #[arg(long, value_parser = options::non_negative)]
    pub alpha: Option<f64>,
}

pub fn run(cmd: ExportCmd) -> Result<()> {
    let device = cmd.model.backend.device()?;
    let task = match cmd.task {
        TaskKind::Parse => Task::Parse,
        TaskKind::Translate => Task::Translate {
            source: cmd.source.clone(),
            target: cmd.target.clone(),
        },
    };
    let mut bundle = model_folder::load(
        &cmd.model.model,
        cmd.model.checkpoint.as_deref(),
        task,
        &device,
    )?;
    for m in &cmd.metrics {
        let (k, v) = m
            .split_once('=')
            .ok_or_else(|| Error::Usage(format!("--metric {m}: expected key=value")))?;
        let value = v
            .parse::<f64>()
            .map(serde_json::Value::from)
            .unwrap_or_else(|_| serde_json::Value::from(v));
        bundle.config.metrics.insert(k.to_string(), value);
    }
    let provenance = &mut bundle.config.provenance;
    provenance.commands.extend(cmd.commands.iter().cloned());
    provenance.steps = cmd.steps.unwrap_or(provenance.steps);
    provenance.training_seconds = cmd
        .training_seconds
        .map_or(provenance.training_seconds, f64::round);
    let decoding = &mut bundle.config.decoding;
    decoding.beam = cmd.beam.unwrap_or(decoding.beam);
    decoding.alpha = cmd.alpha.unwrap_or(decoding.alpha);
    decoding
        .validate()
        .map_err(|e| Error::Usage(format!("--beam/--alpha: {e}")))?;
    let dtype = if cmd.int8 {
        WeightDtype::Int8
    } else if cmd.f16 {
        WeightDtype::F16
    } else {
        WeightDtype::F32
    };
    let files = bundle.to_bytes(dtype)?;
    std::fs::create_dir_all(&cmd.out).map_err(io(&cmd.out))?;
    fsutil::write_atomic(&cmd.out.join(CONFIG_FILE), &files.config)?;
    fsutil::write_atomic(&cmd.out.join(TOKENIZER_FILE), &files.tokenizer)?;
    fsutil::write_atomic(&cmd.out.join(WEIGHTS_FILE), &files.weights)?;
    eprintln!(
        "wrote {} ({:.1} MB of weights)",
        cmd.out.display(),
        files.weights.len() as f64 / 1e6
    );
    Ok(())
}
