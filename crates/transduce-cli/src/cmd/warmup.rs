//! `transduce warmup`: tune and compile every shape class a GPU run will train in, ahead
//! of the run, into the persistent GPU cache ([`transduce_train::backend::cache`]).
//!
//! Each class (rows × length, [`transduce_train::data::shape`]) gets one training step of a scratch
//! model (forward, backward, Adam; the trainer's own `optimizer_step`) and one validation
//! pass, on synthetic tokens: the kernels and their tune keys depend on shapes, precision
//! and the architecture, never on the values. A run started afterwards on the same GPU,
//! driver and binary finds every decision made.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use transduce::burn::module::Module;
use transduce::{ModelConfig, Transformer};

use crate::options;
use transduce_train::backend::Backend;
use transduce_train::data::cache::Pairs;
use transduce_train::data::shape::{self, Shapes};
use transduce_train::error::{Error, Result};
use transduce_train::prepared::Prepared;
use transduce_train::rng::Rng;
use transduce_train::train::engine::loss_scale::{self, LossScale};
use transduce_train::train::observe::start_time::StartWatch;
use transduce_train::train::{
    Examples, StepWork, adam, evaluate_nll, optimizer_step, read_scalars,
};

#[derive(Args)]
pub struct WarmupCmd {
    /// Model preset (as `train --preset`).
    #[arg(long, default_value = "base")]
    pub preset: String,
    /// Model config as JSON (overrides --preset).
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "wgpu")]
    pub backend: Backend,
    /// Compute precision, as the run will use it.
    #[arg(long, default_value = "f32", value_parser = options::precision)]
    pub precision: transduce::Precision,
    /// Tokens per batch, as the run will use it (`train --max-tokens`).
    #[arg(long, default_value_t = 25_000, value_parser = options::count)]
    pub max_tokens: usize,
    /// A prepared data folder: warm exactly the shapes its training and validation batches
    /// take. Without it, every class up to --max-length.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Longest sequence (tokens, either side) to warm without --data (`prepare --max-len`).
    #[arg(long, default_value_t = 256, value_parser = options::count)]
    pub max_length: usize,
    /// Vocabulary size without --data (with it, the data's): the output layer's shape.
    #[arg(long, value_parser = options::count, conflicts_with = "data")]
    pub vocab: Option<usize>,
    /// As `train --no-fusion` (fusion changes every kernel).
    #[arg(long)]
    pub no_fusion: bool,
}

/// Every shape class of sequences up to `max_length` tokens (plus the BOS/EOS a pair
/// gains), under a budget of `max_tokens`.
pub fn all_classes(max_length: usize, max_tokens: usize) -> Vec<(usize, usize)> {
    let longest = shape::class_length(max_length + 1);
    let mut lengths = BTreeSet::new();
    let mut n = 1;
    while n <= longest {
        lengths.insert(shape::class_length(n));
        n = shape::class_length(n) + 1;
    }
    lengths
        .into_iter()
        .map(|length| (shape::class_rows(length, max_tokens), length))
        .collect()
}

/// The shapes a prepared data set's batches take, training and validation.
fn data_classes(pairs: &[&Pairs], max_tokens: usize) -> BTreeSet<(usize, usize)> {
    let mut shapes = BTreeSet::new();
    for pairs in pairs {
        let src: Vec<usize> = pairs.src.iter().map(Vec::len).collect();
        let tgt: Vec<usize> = pairs.tgt.iter().map(Vec::len).collect();
        for batch in Shapes::Classes.batches(&src, &tgt, max_tokens) {
            shapes.insert(shape::batch_shape(
                |i| src[i],
                |i| tgt[i],
                &batch,
                max_tokens,
            ));
        }
    }
    shapes
}

/// `rows` synthetic pairs whose class is `length`: both sides one token short of it.
fn class_pairs(rows: usize, length: usize, vocab: usize, rng: &mut Rng) -> Pairs {
    let mut pairs = Pairs::default();
    let side = length.saturating_sub(1).max(1);
    for _ in 0..rows {
        let mut seq = || -> Vec<u32> {
            (0..side)
                .map(|_| 4 + rng.below(vocab as u64 - 4) as u32)
                .collect()
        };
        let (s, t) = (seq(), seq());
        pairs.push(s, t);
    }
    pairs
}

pub fn run(cmd: WarmupCmd) -> Result<()> {
    if matches!(cmd.backend, Backend::Cpu) {
        return Err(Error::Usage(
            "warmup: the CPU backends neither tune nor compile kernels; use --backend wgpu or cuda"
                .into(),
        ));
    }
    let mut config = match &cmd.config {
        Some(path) => super::train::read_model_config(path)?,
        None => ModelConfig::preset(&cmd.preset)?,
    };
    let shapes: Vec<(usize, usize)> = match &cmd.data {
        Some(dir) => {
            let data = Prepared::load(dir)?;
            config.vocab_size = data.tokenizer.vocab_size();
            let mut sets = vec![&data.train];
            sets.extend(data.valid.as_ref());
            data_classes(&sets, cmd.max_tokens).into_iter().collect()
        }
        None => all_classes(cmd.max_length, cmd.max_tokens),
    };
    if let Some(vocab) = cmd.vocab {
        config.vocab_size = vocab;
    }
    config.validate()?;
    transduce_train::backend::set_fusion(!cmd.no_fusion)?;
    let device = cmd.backend.device()?;
    loss_scale::check(cmd.precision, std::slice::from_ref(&device))?;
    let longest = shapes.iter().map(|s| s.1).max().unwrap_or(0);
    if longest > config.max_len + 1 && config.positional == transduce::Positional::Learned {
        return Err(Error::Usage(format!(
            "warmup: shapes up to {longest} tokens, longer than this model's max_len {}",
            config.max_len
        )));
    }
    let cache =
        transduce_train::backend::cache::placement().map_or("none".into(), |p| p.to_string());
    eprintln!(
        "warmup: {} shapes (rows × length) of {} parameters, {}, {} tokens a batch; cache {cache}",
        shapes.len(),
        config.num_params(),
        cmd.precision.name(),
        cmd.max_tokens
    );
    let mut watch = StartWatch::begin();
    let ad = device.clone().autodiff();
    ad.seed(1);
    let mut model = Transformer::new(&config, &ad)?.with_precision(cmd.precision);
    let mut optimizer = adam();
    let mut loss_scale = LossScale::initial(cmd.precision);
    let mut rng = Rng::new(7);
    watch.loaded();
    let began = Instant::now();
    for (n, &(rows, length)) in shapes.iter().enumerate() {
        let t = Instant::now();
        let pairs = class_pairs(rows, length, config.vocab_size, &mut rng);
        let batch: Vec<usize> = (0..rows).collect();
        let group = [&batch];
        let work = StepWork {
            device: &ad,
            group: &group,
            examples: Examples {
                pairs: &pairs,
                focus: None,
                classes: Some(cmd.max_tokens),
            },
            group_tokens: rows * length,
            epsilon: config.label_smoothing,
            seed: n as u64,
            collective: None,
        };
        // A scratch model: the learning rate moves it, but nothing is kept.
        let (stepped, loss) = optimizer_step(
            model,
            &mut optimizer,
            &work,
            1e-4,
            cmd.precision,
            &mut loss_scale,
        )?;
        model = stepped;
        read_scalars(vec![loss.smoothed])?;
        evaluate_nll(
            &model.valid(),
            &pairs,
            None,
            cmd.max_tokens,
            Shapes::Classes,
        )?;
        watch.step();
        eprintln!(
            "  {rows:>5} × {length:<4} {:>7.1} s",
            t.elapsed().as_secs_f64()
        );
    }
    let report = watch.report();
    println!(
        "warmed {} shapes in {:.1} s: {}, compiled {} kernels; cache {cache}",
        shapes.len(),
        began.elapsed().as_secs_f64(),
        report.tunes_line(),
        report.compiled
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_up_to_the_longest_sequence() {
        let lengths: Vec<usize> = all_classes(256, 4096).iter().map(|s| s.1).collect();
        assert_eq!(
            lengths,
            [
                4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256,
                320
            ]
        );
        assert_eq!(all_classes(256, 4096)[0], (1024, 4));
        assert_eq!(all_classes(6, 100), [(25, 4), (12, 8)]);
    }

    /// Synthetic pairs fall in the class they were made for, and a data set's shapes are
    /// those its class batches take.
    #[test]
    fn warmed_shapes_are_the_shapes_training_takes() {
        let mut rng = Rng::new(3);
        for length in [4, 12, 40, 80, 320] {
            let pairs = class_pairs(3, length, 100, &mut rng);
            let shapes = data_classes(&[&pairs], 10_000);
            assert_eq!(
                shapes.into_iter().collect::<Vec<_>>(),
                [(shape::class_rows(length, 10_000), length)]
            );
        }
    }
}
