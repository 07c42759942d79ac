//! `transduce bench`: training tokens/s and decoding sentences/s on a fixed synthetic
//! workload, next to the backend's plain matmul GFLOP/s.

use std::time::Instant;

use transduce::burn::optim::{AdamConfig, GradientsParams};
use transduce::burn::prelude::*;
use transduce::burn::tensor::TensorData;
use transduce::decode::{DecodeOptions, Ensemble, beam_search};
use transduce::{HostModel, ModelConfig, Precision, Transformer};

use crate::data::cache::Pairs;
use crate::error::Result;
use crate::train::precision::{LossScale, unscale};
use crate::train::{batch_tensors, loss, rng::Rng};

pub struct BenchReport {
    pub matmul_gflops: f64,
    /// Largest difference between the timed chain of 1024² products and the same chain on
    /// burn-flex, relative to the largest entry: a fast wrong result is no benchmark.
    pub matmul_error: f64,
    pub train_tokens_per_sec: f64,
    pub train_gflops: f64,
    pub decode_sentences_per_sec: f64,
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
        .map_err(|e| crate::error::CliError::Usage(format!("device read failed: {e:?}")))
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

pub fn run(
    config: &ModelConfig,
    device: &Device,
    batch_tokens: usize,
    steps: usize,
    precision: Precision,
) -> Result<BenchReport> {
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

    // Training: fixed batches of 25-token sentences.
    let len = 25;
    let rows = (batch_tokens / (len + 1)).max(1);
    let pairs = synthetic(rows, len, config.vocab_size, 1);
    let batch: Vec<usize> = (0..rows).collect();
    let ad = device.clone().autodiff();
    ad.seed(1);
    let mut model = Transformer::new(config, &ad)?.with_precision(precision);
    // As `train` does: f16 scales the loss, and every half-precision step unscales and
    // checks its gradients (one read).
    let scale = LossScale::initial(precision).map(|s| s.scale);
    let mut optim = AdamConfig::new()
        .with_beta_1(0.9)
        .with_beta_2(0.98)
        .with_epsilon(1e-9)
        .init();
    let mut step = |model: Transformer| -> Result<Transformer> {
        let (logits, tgt_out) = batch_tensors(&pairs, &batch, None, &ad)?.logits(&model);
        let l = loss::label_smoothed(logits, tgt_out, config.label_smoothing).smoothed;
        let grads =
            GradientsParams::from_grads(l.mul_scalar(scale.unwrap_or(1.0)).backward(), &model);
        let grads = match scale {
            Some(scale) => unscale(grads, &model, 1.0 / scale)?.0,
            None => grads,
        };
        let model = optim.step(1e-4, model, grads);
        ad.sync().ok();
        Ok(model)
    };
    model = step(model)?; // warm-up
    let start = Instant::now();
    for _ in 0..steps.max(1) {
        model = step(model)?;
    }
    let secs = start.elapsed().as_secs_f64();
    let tokens = rows * (len + 1) * steps.max(1);
    let train_tokens_per_sec = tokens as f64 / secs;
    let train_gflops = train_flops(config, tokens) / secs / 1e9;

    // Decoding: beam 4 over 16 sentences of 20 tokens, 20 output tokens each, through
    // what `translate` uses on this device (the host decoder on the CPU).
    let eval = Transformer::new(config, device)?;
    let host = if device.clone().inner() == Device::flex() {
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
    };
    beam_search(&eval, &sources[..2], &options, None)?;
    let start = Instant::now();
    beam_search(&eval, &sources, &options, None)?;
    let decode_sentences_per_sec = sources.len() as f64 / start.elapsed().as_secs_f64();
    Ok(BenchReport {
        matmul_gflops,
        matmul_error,
        train_tokens_per_sec,
        train_gflops,
        decode_sentences_per_sec,
    })
}
