//! `transduce translate`: batched beam search over lines of text.

use indicatif::{ProgressBar, ProgressStyle};
use transduce::Bundle;
use transduce::decode::{Constraint, DecodeOptions, Ensemble, best_outputs};
use transduce_gpu::GpuModel;

use crate::error::{CliError, Result};

/// What decodes: the bundles' models (host decoder on the CPU, burn on other devices), or
/// the GPU decoder (`--backend wgpu` with one model).
pub enum Decoder<'a> {
    Models(Ensemble<'a>),
    Gpu(&'a GpuModel),
}

impl<'a> Decoder<'a> {
    /// The bundles' own models.
    pub fn of_bundles(bundles: &'a [Bundle]) -> Result<Self> {
        Ok(Decoder::Models(Ensemble::of_bundles(bundles)?))
    }

    /// Each source's best output ids (greedy for beam 1, else beam search).
    pub fn best_outputs(
        &self,
        sources: &[Vec<u32>],
        options: &DecodeOptions,
        constraint: Option<&dyn Constraint>,
    ) -> Result<Vec<Vec<u32>>> {
        Ok(match self {
            Decoder::Models(models) => best_outputs(models, sources, options, constraint)?,
            Decoder::Gpu(model) => {
                pollster::block_on(model.best_outputs(sources, options, constraint))?
            }
        })
    }
}

/// Translates every line with `bundles` (one model, or an ensemble sharing the first one's
/// tokenizer); empty lines stay empty. Lines are sorted by length into batches of
/// `batch_size` so padding stays small, and written back in input order.
pub fn translate_lines(
    bundles: &[Bundle],
    decoder: &Decoder,
    lines: &[String],
    options: &DecodeOptions,
    batch_size: usize,
    progress: bool,
) -> Result<Vec<String>> {
    let Some(bundle) = bundles.first() else {
        return Err(CliError::Usage("--model is required".into()));
    };
    let encoded: Vec<Vec<u32>> = lines
        .iter()
        .map(|l| bundle.tokenizer.encode(l.trim()))
        .collect::<transduce::Result<_>>()?;
    let mut order: Vec<usize> = (0..lines.len())
        .filter(|&i| !encoded[i].is_empty())
        .collect();
    order.sort_by_key(|&i| (encoded[i].len(), i));
    let bar = if progress {
        let bar = ProgressBar::new(lines.len() as u64);
        bar.set_style(
            ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len} sentences, eta {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    bar.inc((lines.len() - order.len()) as u64);
    let mut out = vec![String::new(); lines.len()];
    for chunk in order.chunks(batch_size.max(1)) {
        let sources: Vec<Vec<u32>> = chunk.iter().map(|&i| encoded[i].clone()).collect();
        let best = decoder.best_outputs(&sources, options, None)?;
        for (&i, tokens) in chunk.iter().zip(best) {
            out[i] = bundle.tokenizer.decode(&tokens)?;
        }
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    Ok(out)
}
