//! The decoder of `transduce translate` (and of its noisy channel's n-best lists): the
//! bundles' models or the GPU decoder, over lines of text batched by length.

use indicatif::{ProgressBar, ProgressStyle};
use transduce::Bundle;
use transduce::decode::{
    Constraint, DecodeOptions, Ensemble, Hypothesis, best_outputs, hypotheses,
};
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

    /// Each source's finished hypotheses, best first (one for greedy, at most the beam).
    pub fn hypotheses(
        &self,
        sources: &[Vec<u32>],
        options: &DecodeOptions,
    ) -> Result<Vec<Vec<Hypothesis>>> {
        Ok(match self {
            Decoder::Models(models) => hypotheses(models, sources, options, None)?,
            Decoder::Gpu(model) => pollster::block_on(model.hypotheses(sources, options, None))?,
        })
    }
}

/// One translation of a line, as an n-best list holds it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Candidate {
    pub text: String,
    /// Σ log p of its wordpieces, EOS included (natural log); 0 for an empty line.
    pub log_prob: f64,
    /// What beam search ranks by: `log_prob / lp(|Y|)` (§6.1).
    pub score: f64,
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
    let bundle = first(bundles)?;
    in_length_order(
        bundle,
        lines,
        batch_size,
        progress,
        String::new(),
        |sources| {
            decoder
                .best_outputs(sources, options, None)?
                .iter()
                .map(|tokens| Ok(bundle.tokenizer.decode(tokens)?))
                .collect()
        },
    )
}

/// The `n` best translations of every line, best first, batched as [`translate_lines`]
/// batches them: at most `n`, and no more than the search finished (beam search keeps at
/// most `beam`, greedy one). An empty line gets one empty translation.
pub fn nbest_lines(
    bundles: &[Bundle],
    decoder: &Decoder,
    lines: &[String],
    options: &DecodeOptions,
    batch_size: usize,
    n: usize,
    progress: bool,
) -> Result<Vec<Vec<Candidate>>> {
    let bundle = first(bundles)?;
    let empty = vec![Candidate::default()];
    in_length_order(bundle, lines, batch_size, progress, empty, |sources| {
        decoder
            .hypotheses(sources, options)?
            .into_iter()
            .map(|hyps| {
                hyps.into_iter()
                    .take(n)
                    .map(|h| {
                        Ok(Candidate {
                            text: bundle.tokenizer.decode(&h.tokens)?,
                            log_prob: h.log_prob,
                            score: h.score,
                        })
                    })
                    .collect()
            })
            .collect()
    })
}

fn first(bundles: &[Bundle]) -> Result<&Bundle> {
    bundles
        .first()
        .ok_or_else(|| CliError::Usage("--model is required".into()))
}

/// `decode` applied to every non-empty line's ids, in batches of `batch_size` lines of
/// similar length (so padding stays small), its results put back in input order; empty
/// lines get `empty`.
fn in_length_order<T: Clone>(
    bundle: &Bundle,
    lines: &[String],
    batch_size: usize,
    progress: bool,
    empty: T,
    mut decode: impl FnMut(&[Vec<u32>]) -> Result<Vec<T>>,
) -> Result<Vec<T>> {
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
    let mut out = vec![empty; lines.len()];
    for chunk in order.chunks(batch_size.max(1)) {
        let sources: Vec<Vec<u32>> = chunk.iter().map(|&i| encoded[i].clone()).collect();
        for (&i, result) in chunk.iter().zip(decode(&sources)?) {
            out[i] = result;
        }
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    Ok(out)
}
