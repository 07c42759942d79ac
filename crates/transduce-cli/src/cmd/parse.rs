//! `transduce parse`: parse English sentences into trees EVALB reads (§6.3).

use std::path::PathBuf;

use clap::Args;
use transduce::Task;
use transduce::decode::DecodeOptions;

use super::{EnsembleArgs, read_input, write_output};
use crate::{options, parsing};
use transduce_train::backend::Backend;
use transduce_train::error::{Error, Result};
use transduce_train::model_folder;

#[derive(Args)]
pub struct ParseCmd {
    #[command(flatten)]
    pub model: EnsembleArgs,
    /// Input: one sentence a line as space-separated treebank tokens, or a treebank tree
    /// a line (its words and POS tags are used). Default: standard input.
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Output file (default: standard output).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Input lines are raw English (never trees): split into treebank tokens first.
    #[arg(long)]
    pub raw: bool,
    /// Beam size (§6.3: 21).
    #[arg(long, default_value_t = 21, value_parser = options::beam)]
    pub beam: usize,
    /// Length penalty α (§6.3: 0.3).
    #[arg(long, default_value_t = 0.3, value_parser = options::non_negative)]
    pub alpha: f64,
    /// Output may be this many tokens longer than the input (§6.3: 300).
    #[arg(long, default_value_t = 300)]
    pub max_extra: usize,
    /// Decode without the well-formedness constraint (malformed output is repaired).
    #[arg(long)]
    pub no_constraint: bool,
    /// With several --model: `mean` decodes them as one ensemble (shared vocabulary);
    /// `vote` lets each parse alone and keeps the constituents at least half of them
    /// propose (any vocabularies).
    #[arg(long, value_enum, default_value = "mean")]
    pub combine: parsing::Combine,
    /// Ignore the model: output the right-branching baseline.
    #[arg(long)]
    pub right_branching: bool,
    /// Sentences decoded together.
    #[arg(long, default_value_t = 8, value_parser = options::count)]
    pub batch_size: usize,
    #[arg(long)]
    pub quiet: bool,
}

pub fn run(cmd: ParseCmd) -> Result<()> {
    let input_name = cmd
        .input
        .as_ref()
        .map_or("<stdin>".to_string(), |p| p.display().to_string());
    let lines = read_input(cmd.input.as_deref())?;
    let sentences = parsing::read_sentences(&lines, cmd.raw, &input_name)?;
    // One model on wgpu decodes on the GPU decoder (read on the CPU, weights uploaded).
    let gpu_decoder = cmd.model.backend == Backend::Wgpu && cmd.model.models.len() == 1;
    let (bundles, method) = if cmd.right_branching {
        (Vec::new(), parsing::Method::RightBranching)
    } else {
        let device = if gpu_decoder {
            Backend::Cpu.device()?
        } else {
            cmd.model.backend.device()?
        };
        if cmd.model.models.is_empty() {
            return Err(Error::Usage(
                "--model is required (or --right-branching)".into(),
            ));
        }
        let mut bundles = model_folder::load_ensemble(
            &cmd.model.models,
            &cmd.model.checkpoints,
            Task::Parse,
            &device,
            cmd.combine == parsing::Combine::Mean,
        )?;
        cmd.model.apply_compute(&mut bundles);
        let method = parsing::Method::Model {
            constrained: !cmd.no_constraint,
            options: DecodeOptions {
                beam: cmd.beam,
                alpha: cmd.alpha,
                max_extra: cmd.max_extra,
                ..DecodeOptions::default()
            },
            batch_size: cmd.batch_size,
            combine: cmd.combine,
        };
        (bundles, method)
    };
    let gpu = match bundles.first() {
        Some(bundle) if gpu_decoder => Some(crate::gpu::open(bundle)?),
        _ => None,
    };
    let (out, malformed) =
        parsing::parse_sentences(&bundles, gpu.as_ref(), &sentences, &method, !cmd.quiet)?;
    if !cmd.right_branching {
        eprintln!(
            "{} sentences; {malformed} decoder outputs were not well-formed trees and were repaired",
            out.len()
        );
    }
    write_output(&out, cmd.output.as_deref())?;
    Ok(())
}
