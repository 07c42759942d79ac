//! `transduce bench`: training tokens/s and decoding sentences/s on a fixed synthetic
//! workload, next to the backend's plain matmul GFLOP/s.

use std::path::Path;
use std::time::{Duration, Instant};

use transduce::burn::prelude::*;
use transduce::burn::tensor::TensorData;
use transduce::decode::{DecodeOptions, Ensemble, beam_search};
use transduce::{HostModel, ModelConfig, Precision, Transformer};

use transduce::train::{TeacherForced, adam};
use transduce_train::data::batch::Batch;
use transduce_train::data::cache::Pairs;
use transduce_train::error::{Result, io};
use transduce_train::rng::Rng;
use transduce_train::train::batches::{Examples, teacher_forced};
use transduce_train::train::config::LOG_EVERY;
use transduce_train::train::engine::adam::DeviceAdam;
use transduce_train::train::engine::eager::{StepWork, optimizer_step, optimizer_step_between};
use transduce_train::train::engine::loss_scale::LossScale;
use transduce_train::train::engine::replay::GraphTrainer;
use transduce_train::train::observe::census::{Census, StepCensus, wait_cost_ns};
use transduce_train::train::observe::start_time::{StartReport, StartWatch};
use transduce_train::train::read::read_scalars;

/// The training workload and what the benchmark does besides timing it.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Target tokens per step (rows of 25 tokens, as many as fit).
    pub batch_tokens: usize,
    /// Timed steps, after one untimed warm-up step.
    pub steps: usize,
    pub precision: Precision,
    /// Time training only: no matmul chain, no decoding.
    pub training_only: bool,
    /// Steps captured as graphs and replayed ([`transduce_train::train::engine::replay`]).
    pub graph: bool,
    /// The fused kernels allowed (`bench --no-fused-layers` turns them off): the model's
    /// and, in replayed steps, Adam's.
    pub fused: bool,
    /// Writes the initial weights (`init.safetensors`, the bundle's names) and the batch
    /// (`batch.safetensors`: `src`, `tgt_in`, `tgt_out` as I64) here, so that another
    /// framework (`scripts/bench/pytorch.py --exchange`) trains the same model from the
    /// same start on the same batch.
    pub exchange: Option<std::path::PathBuf>,
    /// Starts from these weights (an exchange folder's `init.safetensors`) instead of a
    /// random draw, which differs between backends: every row of a side-by-side then
    /// trains the same model from the same start.
    pub init: Option<std::path::PathBuf>,
}

pub struct BenchReport {
    /// Target tokens (EOS included, fairseq's count) per step, and rows per step.
    pub tokens_per_step: usize,
    pub rows: usize,
    /// Mean time of a timed step.
    pub step_ms: f64,
    /// Label-smoothed loss per target token of the last timed step: with dropout 0, the
    /// same in any framework that computes the same thing from the same start.
    pub final_loss: f64,
    /// Which step (1-based, warm-up steps counted) `final_loss` is the loss of: the same
    /// step in two rows is the same training.
    pub loss_step: usize,
    pub matmul_gflops: f64,
    /// Largest difference between the timed chain of 1024² products and the same chain on
    /// burn-flex, relative to the largest entry: a fast wrong result is no benchmark.
    pub matmul_error: f64,
    pub train_tokens_per_sec: f64,
    pub train_gflops: f64,
    pub decode_sentences_per_sec: f64,
    /// What a timed step cost the host: launches, kernels, CPU time, reads.
    pub census: Option<StepCensus>,
    /// Launches of one step's forward and backward passes, and of its optimizer update.
    pub phases: Option<(f64, f64)>,
    /// What the start cost: loading, tunes, compiles, first step, steady rate.
    pub start: Option<StartReport>,
    /// With `graph`: "replayed" or why the steps ran eagerly.
    pub graph: Option<String>,
}

fn synthetic(n: usize, len: usize, vocab: usize, seed: u64) -> Pairs {
    let mut rng = Rng::new(seed);
    let mut pairs = Pairs::default();
    for _ in 0..n {
        let seq = |rng: &mut Rng| -> Vec<u32> {
            (0..len)
                .map(|_| 4 + rng.below(vocab as u64 - 4) as u32)
                .collect()
        };
        let s = seq(&mut rng);
        let t = seq(&mut rng);
        pairs.push(s, t);
    }
    pairs
}

/// A tensor's values as f32, copied out of the device.
fn read(t: TensorData) -> Result<Vec<f32>> {
    t.try_into_vec_as::<f32>()
        .map_err(|e| transduce_train::error::Error::Usage(format!("device read failed: {e:?}")))
}

/// The timed chain's result next to the same chain on burn-flex: the largest difference,
/// relative to the largest entry.
fn matmul_error(got: Vec<f32>, a: Tensor<2>, b: Tensor<2>, reps: usize) -> Result<f64> {
    let cpu = Device::flex();
    let b = Tensor::<2>::from_data(b.to_data(), &cpu);
    let mut expected = Tensor::<2>::from_data(a.to_data(), &cpu);
    for _ in 0..reps {
        expected = expected.matmul(b.clone()).div_scalar(b.dims()[0] as f64);
    }
    let expected = read(expected.into_data())?;
    let scale = expected
        .iter()
        .fold(0f32, |m, x| m.max(x.abs()))
        .max(f32::MIN_POSITIVE);
    let worst = got
        .iter()
        .zip(&expected)
        .fold(0f32, |m, (x, y)| m.max((x - y).abs()));
    Ok((worst / scale) as f64)
}

/// FLOPs of one training step ≈ 6 × parameters × tokens (forward 2, backward 4).
fn train_flops(config: &ModelConfig, tokens: usize) -> f64 {
    6.0 * config.num_params() as f64 * tokens as f64
}

/// The batch as an I64 tensor for the exchange file.
fn id_tensor(rows: &[Vec<u32>]) -> (Vec<usize>, Vec<u8>) {
    let shape = vec![rows.len(), rows.first().map_or(0, Vec::len)];
    let bytes = rows
        .iter()
        .flatten()
        .flat_map(|&id| (id as i64).to_le_bytes())
        .collect();
    (shape, bytes)
}

/// `init.safetensors` and `batch.safetensors` in `dir` (see [`BenchOptions::exchange`]).
fn write_exchange(dir: &Path, model: &Transformer, pairs: &Pairs, batch: &Batch) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let init = transduce::bundle::save_weights(model, transduce::WeightDtype::F32)?;
    let path = dir.join("init.safetensors");
    std::fs::write(&path, init).map_err(io(&path))?;
    let TeacherForced {
        sources: src,
        inputs: tgt_in,
        outputs: tgt_out,
    } = teacher_forced(pairs, batch);
    let tensors = [
        ("src", id_tensor(&src)),
        ("tgt_in", id_tensor(&tgt_in)),
        ("tgt_out", id_tensor(&tgt_out)),
    ];
    let views: Vec<(&str, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(name, (shape, bytes))| {
            safetensors::tensor::TensorView::new(safetensors::Dtype::I64, shape.clone(), bytes)
                .map(|v| (*name, v))
        })
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| transduce_train::error::Error::Usage(format!("batch.safetensors: {e}")))?;
    let bytes = safetensors::tensor::serialize(views, None)
        .map_err(|e| transduce_train::error::Error::Usage(format!("batch.safetensors: {e}")))?;
    let path = dir.join("batch.safetensors");
    std::fs::write(&path, bytes).map_err(io(&path))?;
    Ok(())
}

pub fn run(config: &ModelConfig, device: &Device, options: &BenchOptions) -> Result<BenchReport> {
    let (matmul_gflops, matmul_error) = if options.training_only {
        (f64::NAN, 0.0)
    } else {
        matmul(device)?
    };
    let train = train(config, device, options)?;
    let decode_sentences_per_sec = if options.training_only {
        f64::NAN
    } else {
        decode(config, device)?
    };
    Ok(BenchReport {
        matmul_gflops,
        matmul_error,
        decode_sentences_per_sec,
        ..train
    })
}

/// GFLOP/s of a chain of 1024² products, and its error against burn-flex.
fn matmul(device: &Device) -> Result<(f64, f64)> {
    // Plain matmul throughput.
    let n = 1024;
    let a = Tensor::<2>::random(
        [n, n],
        transduce::burn::tensor::Distribution::Default,
        device,
    );
    let b = Tensor::<2>::random(
        [n, n],
        transduce::burn::tensor::Distribution::Default,
        device,
    );
    let reps = 5;
    // A chain of dependent products, read once at the end: nothing can be skipped or
    // overlapped with the read. The read copies the values out: a GPU backend's
    // `into_data` may return before the device is done, waiting only when the bytes are
    // first touched.
    let chain = || -> Result<Vec<f32>> {
        let mut c = a.clone();
        for _ in 0..reps {
            c = c.matmul(b.clone()).div_scalar(n as f64);
        }
        read(c.into_data())
    };
    // Untimed first run: compiles (with fusion: fuses and autotunes) the timed kernels.
    chain()?;
    let start = Instant::now();
    let product = chain()?;
    let matmul_gflops =
        2.0 * (n as f64).powi(3) * reps as f64 / start.elapsed().as_secs_f64() / 1e9;
    let matmul_error = matmul_error(product, a, b, reps)?;
    Ok((matmul_gflops, matmul_error))
}

/// The timed training steps (the report's training fields; the rest NaN).
fn train(config: &ModelConfig, device: &Device, options: &BenchOptions) -> Result<BenchReport> {
    let &BenchOptions {
        batch_tokens,
        steps,
        precision,
        ..
    } = options;
    let mut watch = StartWatch::begin();
    // Training: fixed batches of 25-token sentences.
    let len = 25;
    let rows = (batch_tokens / (len + 1)).max(1);
    let tokens_per_step = rows * (len + 1);
    let pairs = synthetic(rows, len, config.vocab_size, 1);
    let batch: Vec<usize> = (0..rows).collect();
    let ad = device.clone().autodiff();
    ad.seed(1);
    let model = match &options.init {
        Some(path) => {
            let bytes = std::fs::read(path).map_err(io(path))?;
            transduce::bundle::load_weights(config, &bytes, &ad)?
        }
        None => Transformer::new(config, &ad)?,
    };
    let model = model.with_precision(precision).with_fused(options.fused);
    if let Some(dir) = &options.exchange {
        write_exchange(dir, &model, &pairs, &batch)?;
    }
    if options.graph {
        let forced = teacher_forced(&pairs, &batch);
        return train_graph(model, &ad, &forced, config, options, watch, tokens_per_step);
    }
    // The trainer's own step (`train::optimizer_step`): f16 scales the loss, and every
    // half-precision step unscales and checks its gradients (one read); losses are read
    // back every `LOG_EVERY` steps in one transaction, as `train` reads them.
    let mut loss_scale = LossScale::initial(precision);
    let mut optimizer = adam();
    let group = [&batch];
    let work = |n: u64| StepWork {
        device: &ad,
        group: &group,
        examples: Examples {
            pairs: &pairs,
            focus: None,
            classes: None,
        },
        group_tokens: tokens_per_step,
        epsilon: config.label_smoothing,
        seed: n,
        collective: None,
    };
    watch.loaded();
    let mut step = |model: Transformer, n: u64| {
        let stepped = optimizer_step(
            model,
            &mut optimizer,
            &work(n),
            1e-4,
            precision,
            &mut loss_scale,
        );
        watch.step();
        stepped
    };
    // Two untimed steps: the first compiles (and on GPUs fuses and autotunes) the
    // kernels; the second is the first with Adam's moments already there.
    let mut model = model;
    let mut warm = Vec::new();
    for n in 0..2 {
        let loss;
        (model, loss) = step(model, n)?;
        warm.push(loss.smoothed);
    }
    read_scalars(warm)?;
    let steps = steps.max(1);
    // The device is drained (the warm-up's losses were read): the trainer's threads are
    // idle, and what they cost the host now is their waiting, not work.
    let wait_cost = wait_cost_ns(Duration::from_millis(300));
    let census = Census::start();
    let start = Instant::now();
    let mut pending = Vec::new();
    let mut last = f64::NAN;
    for n in 0..steps {
        let loss;
        (model, loss) = step(model, 2 + n as u64)?;
        pending.push(loss.smoothed);
        if pending.len() >= LOG_EVERY || n + 1 == steps {
            last = *read_scalars(std::mem::take(&mut pending))?
                .last()
                .expect("a loss was read");
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let census = census.finish(steps as u64);
    let census = match wait_cost {
        Some(ns) => census.with_wait_cost(ns),
        None => census,
    };
    // One more step, untimed, with the device drained between its phases: the launches
    // of the forward and backward passes apart from the optimizer's (burn-fusion launches
    // queued work when the device syncs, so each phase's launches land in its own count).
    ad.sync().ok();
    let mut passes = Some(Census::start());
    let (mut backward, mut update) = (None, None);
    let between = || {
        ad.sync().ok();
        backward = passes.take().map(|c| c.finish(1));
        update = Some(Census::start());
    };
    let (phased, _) = optimizer_step_between(
        model,
        &mut optimizer,
        &work(2 + steps as u64),
        1e-4,
        precision,
        &mut loss_scale,
        between,
    )?;
    ad.sync().ok();
    let phases = backward
        .zip(update)
        .map(|(b, u)| (b.launches, u.finish(1).launches));
    model = phased;
    let tokens = tokens_per_step * steps;
    let train_tokens_per_sec = tokens as f64 / secs;
    let train_gflops = train_flops(config, tokens) / secs / 1e9;
    let final_loss = last;
    drop(model);
    Ok(BenchReport {
        tokens_per_step,
        rows,
        step_ms: 1e3 * secs / steps as f64,
        final_loss,
        loss_step: 2 + steps,
        matmul_gflops: f64::NAN,
        matmul_error: 0.0,
        train_tokens_per_sec,
        train_gflops,
        decode_sentences_per_sec: f64::NAN,
        census: Some(census),
        phases,
        start: Some(watch.report()),
        graph: None,
    })
}

/// [`train`] with [`GraphTrainer`]: the untimed steps warm the batch's shape up and
/// capture it; the timed steps are replays (or eager steps where the backend or the model
/// cannot be captured).
fn train_graph(
    mut model: Transformer,
    device: &Device,
    forced: &TeacherForced,
    config: &ModelConfig,
    options: &BenchOptions,
    mut watch: StartWatch,
    tokens_per_step: usize,
) -> Result<BenchReport> {
    let mut adam = DeviceAdam::new(device, 0, 1024).with_fused(options.fused);
    if let Some(scale) = LossScale::initial(options.precision) {
        adam = adam.with_loss_scale(&scale, options.precision);
    }
    let mut trainer = GraphTrainer::new(device, adam, config.label_smoothing);
    let lr = |_: u64| 1e-4;
    watch.loaded();
    let mut warm = Vec::new();
    for n in 1..=GraphTrainer::WARMUP as u64 {
        let sums;
        (model, sums) = trainer.step(model, forced, n, &lr)?;
        watch.step();
        warm.push(sums);
    }
    read_scalars(warm)?;
    if let Some(why) = &trainer.fallback {
        eprintln!("graph: eager steps: {why}");
    }
    let steps = options.steps.max(1);
    // The device is drained (the warm-up's losses were read): the trainer's threads are
    // idle, and what they cost the host now is their waiting, not work.
    let wait_cost = wait_cost_ns(Duration::from_millis(300));
    let census = Census::start();
    let start = Instant::now();
    let mut pending = Vec::new();
    let mut last = f64::NAN;
    for n in 0..steps {
        let sums;
        (model, sums) = trainer.step(model, forced, 1 + (GraphTrainer::WARMUP + n) as u64, &lr)?;
        watch.step();
        pending.push(sums);
        if pending.len() >= LOG_EVERY || n + 1 == steps {
            // `[loss, nll]` per step: the loss is the first.
            let values = read_scalars(std::mem::take(&mut pending))?;
            last = *values.last().expect("a loss was read");
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let census = census.finish(steps as u64);
    let census = match wait_cost {
        Some(ns) => census.with_wait_cost(ns),
        None => census,
    };
    drop(model);
    let tokens = tokens_per_step * steps;
    Ok(BenchReport {
        tokens_per_step,
        rows: forced.sources.len(),
        step_ms: 1e3 * secs / steps as f64,
        final_loss: last,
        loss_step: GraphTrainer::WARMUP + steps,
        matmul_gflops: f64::NAN,
        matmul_error: 0.0,
        train_tokens_per_sec: tokens as f64 / secs,
        train_gflops: train_flops(config, tokens) / secs / 1e9,
        decode_sentences_per_sec: f64::NAN,
        census: Some(census),
        phases: None,
        start: Some(watch.report()),
        graph: Some(match &trainer.fallback {
            Some(why) => format!("eager ({why})"),
            None => format!(
                "replayed ({} captured, {} replays, {} eager steps)",
                trainer.counts.captured, trainer.counts.replayed, trainer.counts.eager
            ),
        }),
    })
}

/// Beam-4 sentences/s of a random model of `config`.
fn decode(config: &ModelConfig, device: &Device) -> Result<f64> {
    // Decoding: beam 4 over 16 sentences of 20 tokens, 20 output tokens each, through
    // what `translate` uses on this device (the host decoder on the CPU).
    let eval = Transformer::new(config, device)?;
    let host = if transduce::ops::is_flex(device) {
        Some(HostModel::new(&eval)?)
    } else {
        None
    };
    let eval: Ensemble = match &host {
        Some(host) => host.into(),
        None => (&eval).into(),
    };
    let sources: Vec<Vec<u32>> = synthetic(16, 20, config.vocab_size, 2).src;
    let options = DecodeOptions {
        beam: 4,
        alpha: 0.6,
        max_extra: 0,
        ..DecodeOptions::default()
    };
    beam_search(&eval, &sources[..2], &options, None)?;
    let start = Instant::now();
    beam_search(&eval, &sources, &options, None)?;
    Ok(sources.len() as f64 / start.elapsed().as_secs_f64())
}
