//! The decoder of `transduce translate` (and of its noisy channel's n-best lists): the
//! bundles' models or the GPU decoder, over lines of text batched by length.

use indicatif::{ProgressBar, ProgressStyle};
use transduce::Bundle;
use transduce::decode::{
    Constraint, DecodeOptions, Ensemble, Hypothesis, best_outputs, hypotheses,
};
use transduce_gpu::GpuModel;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use transduce_train::error::{Error, Result};

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

/// How lines are decoded: in batches of `batch_size` lines of similar length, on
/// `threads` threads (the host decoder's; the GPU decoder takes one).
#[derive(Clone, Copy, Debug)]
pub struct Batching {
    pub batch_size: usize,
    pub threads: usize,
    pub progress: bool,
}

/// The threads decoding uses unless told: `RAYON_NUM_THREADS` where set (as for the CPU
/// backend's kernels), else every core.
pub fn default_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Translates every line with `bundles` (one model, or an ensemble sharing the first one's
/// tokenizer); empty lines stay empty. Lines are sorted by length into batches so padding
/// stays small, decoded on the threads `batching` gives, and written back in input order.
pub fn translate_lines(
    bundles: &[Bundle],
    decoder: &Decoder,
    lines: &[String],
    options: &DecodeOptions,
    batching: Batching,
) -> Result<Vec<String>> {
    let bundle = first(bundles)?;
    let text = |outputs: Vec<Vec<u32>>| -> Result<Vec<String>> {
        outputs
            .iter()
            .map(|tokens| Ok(bundle.tokenizer.decode(tokens)?))
            .collect()
    };
    let empty = String::new();
    match decoder {
        Decoder::Models(models) => in_length_order(
            bundle,
            lines,
            batching,
            empty,
            Decode::Shared(&|sources: &[Vec<u32>]| {
                text(best_outputs(models, sources, options, None)?)
            }),
        ),
        Decoder::Gpu(_) => in_length_order(
            bundle,
            lines,
            batching,
            empty,
            Decode::Local(&|sources: &[Vec<u32>]| {
                text(decoder.best_outputs(sources, options, None)?)
            }),
        ),
    }
}

/// The `n` best translations of every line, best first, batched as [`translate_lines`]
/// batches them: at most `n`, and no more than the search finished (beam search keeps at
/// most `beam`, greedy one). An empty line gets one empty translation.
pub fn nbest_lines(
    bundles: &[Bundle],
    decoder: &Decoder,
    lines: &[String],
    options: &DecodeOptions,
    batching: Batching,
    n: usize,
) -> Result<Vec<Vec<Candidate>>> {
    let bundle = first(bundles)?;
    let lists = |found: Vec<Vec<Hypothesis>>| -> Result<Vec<Vec<Candidate>>> {
        found
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
    };
    let empty = vec![Candidate::default()];
    match decoder {
        Decoder::Models(models) => in_length_order(
            bundle,
            lines,
            batching,
            empty,
            Decode::Shared(&|sources: &[Vec<u32>]| {
                lists(hypotheses(models, sources, options, None)?)
            }),
        ),
        Decoder::Gpu(_) => in_length_order(
            bundle,
            lines,
            batching,
            empty,
            Decode::Local(&|sources: &[Vec<u32>]| lists(decoder.hypotheses(sources, options)?)),
        ),
    }
}

/// What decodes a batch: something threads may share (the host decoder), or something
/// one thread uses (the GPU decoder, whose buffers are its own).
enum Decode<'f, T> {
    Shared(&'f (dyn BatchFn<T> + Sync)),
    Local(&'f dyn BatchFn<T>),
}

/// A batch of sources in, their results out.
trait BatchFn<T>: Fn(&[Vec<u32>]) -> Result<Vec<T>> {}
impl<T, F: Fn(&[Vec<u32>]) -> Result<Vec<T>>> BatchFn<T> for F {}

// By hand: a derive would ask `T: Copy`, and only references are copied.
impl<T> Clone for Decode<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Decode<'_, T> {}

fn first(bundles: &[Bundle]) -> Result<&Bundle> {
    bundles
        .first()
        .ok_or_else(|| Error::Usage("--model is required".into()))
}

/// `decode` applied to every non-empty line's ids, in batches of up to `batch_size` lines
/// of similar length (so padding stays small), its results put back in input order;
/// empty lines get `empty`. On several threads each takes the next batch; where there are
/// fewer batches than threads the batches are made smaller, so every thread has one. A
/// line's output does not depend on the others of its batch, so neither the threads nor
/// the batches change it.
fn in_length_order<T: Clone + Send>(
    bundle: &Bundle,
    lines: &[String],
    batching: Batching,
    empty: T,
    decode: Decode<'_, T>,
) -> Result<Vec<T>> {
    let encoded: Vec<Vec<u32>> = lines
        .iter()
        .map(|l| bundle.tokenizer.encode(l.trim()))
        .collect::<transduce::Result<_>>()?;
    let mut order: Vec<usize> = (0..lines.len())
        .filter(|&i| !encoded[i].is_empty())
        .collect();
    order.sort_by_key(|&i| (encoded[i].len(), i));
    let bar = if batching.progress {
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
    let shared = decode;
    let (threads, decode): (usize, &dyn BatchFn<T>) = match shared {
        Decode::Shared(f) => (batching.threads.max(1), f),
        Decode::Local(f) => (1, f),
    };
    let mut size = batching.batch_size.max(1);
    if threads > 1 {
        size = size.min(order.len().div_ceil(threads)).max(1);
    }
    let batches: Vec<&[usize]> = order.chunks(size).collect();
    let run = |batch: &[usize]| -> Result<Vec<T>> {
        let sources: Vec<Vec<u32>> = batch.iter().map(|&i| encoded[i].clone()).collect();
        let results = decode(&sources)?;
        bar.inc(batch.len() as u64);
        Ok(results)
    };
    let results: Vec<Result<Vec<T>>> = if threads == 1 || batches.len() < 2 {
        batches.iter().map(|batch| run(batch)).collect()
    } else {
        let Decode::Shared(decode) = shared else {
            unreachable!("one thread decodes a Local batch")
        };
        let run = |batch: &[usize]| -> Result<Vec<T>> {
            let sources: Vec<Vec<u32>> = batch.iter().map(|&i| encoded[i].clone()).collect();
            let results = decode(&sources)?;
            bar.inc(batch.len() as u64);
            Ok(results)
        };
        let next = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let done: Mutex<Vec<Option<Result<Vec<T>>>>> =
            Mutex::new((0..batches.len()).map(|_| None).collect());
        std::thread::scope(|scope| {
            for _ in 0..threads.min(batches.len()) {
                scope.spawn(|| {
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        if k >= batches.len() || failed.load(Ordering::Relaxed) {
                            return;
                        }
                        let result = run(batches[k]);
                        if result.is_err() {
                            failed.store(true, Ordering::Relaxed);
                        }
                        done.lock().unwrap_or_else(|e| e.into_inner())[k] = Some(result);
                    }
                });
            }
        });
        let done = done.into_inner().unwrap_or_else(|e| e.into_inner());
        // After a failure the batches no thread took are None: the first error is returned
        // before them.
        done.into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::Usage("decoding stopped".into()))))
            .collect()
    };
    let mut out = vec![empty; lines.len()];
    for (batch, result) in batches.iter().zip(results) {
        for (&i, result) in batch.iter().zip(result?) {
            out[i] = result;
        }
    }
    bar.finish_and_clear();
    Ok(out)
}
