//! `transduce translate`: translate lines with a bundle, a run or an ensemble (§6.1).

use std::path::PathBuf;

use clap::Args;
use transduce::Task;
use transduce::decode::DecodeOptions;

use super::{EnsembleArgs, read_input, write_output};
use crate::backend::Backend;
use crate::error::Result;
use crate::{options, source, translate};

#[derive(Args)]
pub struct TranslateCmd {
    #[command(flatten)]
    pub model: EnsembleArgs,
    /// Input file (default: standard input).
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Output file (default: standard output).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Beam size, 1 = greedy (default: the bundle's; §6.1's 4 for a run folder).
    #[arg(long, value_parser = options::beam)]
    pub beam: Option<usize>,
    /// Length penalty α (default: the bundle's; §6.1's 0.6 for a run folder).
    #[arg(long, value_parser = options::non_negative)]
    pub alpha: Option<f64>,
    /// Output may be this many tokens longer than the input (default: the bundle's; 50).
    #[arg(long)]
    pub max_extra: Option<usize>,
    /// Sentences decoded together.
    #[arg(long, default_value_t = 32, value_parser = options::count)]
    pub batch_size: usize,
    #[arg(long)]
    pub quiet: bool,
}

pub fn run(cmd: TranslateCmd) -> Result<()> {
    // One model on wgpu decodes on the GPU decoder: the bundle is read on the CPU and its
    // weights uploaded. An ensemble on wgpu goes through burn's wgpu backend.
    let gpu_decoder = cmd.model.backend == Backend::Wgpu && cmd.model.models.len() == 1;
    let device = if gpu_decoder {
        Backend::Cpu.device()?
    } else {
        cmd.model.backend.device()?
    };
    let task = Task::Translate {
        source: String::new(),
        target: String::new(),
    };
    let mut bundles = source::load_ensemble(
        &cmd.model.models,
        &cmd.model.checkpoints,
        task,
        &device,
        true,
    )?;
    cmd.model.apply_compute(&mut bundles);
    let lines = read_input(cmd.input.as_deref())?;
    let defaults = &bundles[0].config.decoding;
    let options = DecodeOptions {
        beam: cmd.beam.unwrap_or(defaults.beam),
        alpha: cmd.alpha.unwrap_or(defaults.alpha),
        max_extra: cmd.max_extra.unwrap_or(defaults.max_extra),
    };
    let gpu_model = if gpu_decoder {
        Some(crate::gpu::open(&bundles[0])?)
    } else {
        None
    };
    let decoder = match &gpu_model {
        Some(model) => translate::Decoder::Gpu(model),
        None => translate::Decoder::of_bundles(&bundles)?,
    };
    let out = translate::translate_lines(
        &bundles,
        &decoder,
        &lines,
        &options,
        cmd.batch_size,
        !cmd.quiet,
    )?;
    write_output(&out, cmd.output.as_deref())?;
    Ok(())
}
