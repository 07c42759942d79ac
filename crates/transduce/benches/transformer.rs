//! `cargo bench -p transduce`: the CPU backend choice (burn-flex vs ndarray) and the
//! key/value cache. Plain timing, no harness: prints Markdown rows for docs/BENCHMARKS.md.
//!
//! Environment: `TRANSDUCE_BENCH_QUICK=1` runs one iteration of everything (a smoke test).

use std::time::{Duration, Instant};

use burn::module::Module;
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::activation::log_softmax;
use transduce::burn;
use transduce::decode::{DecodeOptions, greedy};
use transduce::model::token_tensor;
use transduce::tokenizer::BOS;
use transduce::{ModelConfig, Transformer};

fn quick() -> bool {
    std::env::var_os("TRANSDUCE_BENCH_QUICK").is_some()
}

/// Median time of `runs` calls after one warm-up call.
fn time<F: FnMut()>(runs: usize, mut f: F) -> Duration {
    f();
    let mut times: Vec<Duration> = (0..runs.max(1))
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn ids(seed: u64, len: usize, vocab: u32) -> Vec<u32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            4 + (x % (vocab as u64 - 4)) as u32
        })
        .collect()
}

/// One forward+backward pass of the `small` preset: 32 pairs of 24 tokens each side.
fn train_step(device: &Device, runs: usize) -> Duration {
    let config = ModelConfig::small();
    let ad = device.clone().autodiff();
    let model = Transformer::new(&config, &ad).unwrap();
    let srcs: Vec<Vec<u32>> = (0..32).map(|i| ids(i, 24, 8000)).collect();
    let tgts: Vec<Vec<u32>> = (0..32).map(|i| ids(i + 100, 24, 8000)).collect();
    time(runs, || {
        let logits = model.forward(
            token_tensor(&srcs, &ad).unwrap(),
            token_tensor(&tgts, &ad).unwrap(),
        );
        let loss = log_softmax(logits, 2).mean().neg();
        let grads = loss.backward();
        drop(grads);
        ad.sync().unwrap();
    })
}

/// Greedy decoding of 16 sentences of 20 tokens, 30 output tokens each (untrained model,
/// so every sentence runs to its length limit: a fixed amount of work).
fn greedy_decode(device: &Device, runs: usize) -> Duration {
    let model = Transformer::new(&ModelConfig::small(), device).unwrap();
    let srcs: Vec<Vec<u32>> = (0..16).map(|i| ids(i, 20, 8000)).collect();
    let options = DecodeOptions {
        beam: 1,
        alpha: 0.6,
        max_extra: 10,
        ..DecodeOptions::default()
    };
    time(runs, || {
        greedy(&model, &srcs, &options, None).unwrap();
    })
}

/// Per-token decoder time for `len` steps, with the cache and by re-running the decoder
/// over the whole prefix (what decoding costs without a cache).
fn cache_vs_full(model: &Transformer, device: &Device, len: usize, runs: usize) -> (f64, f64) {
    let src = vec![ids(7, 20, 8000)];
    let memory = model.encode(token_tensor(&src, device).unwrap());
    let tokens = ids(9, len, 8000);
    let cached = time(runs, || {
        let mut state = model.start_decoding(&memory);
        for &t in std::iter::once(&BOS).chain(&tokens[..len - 1]) {
            let logits = model.decode_step(
                &mut state,
                Tensor::<1, Int>::from_data(TensorData::new(vec![t as i32], [1]), device),
            );
            logits.into_data();
        }
    });
    let full = time(runs, || {
        let mut prefix = vec![BOS];
        for &t in &tokens[..len - 1] {
            let logits = model.decode(&memory, token_tensor(&[prefix.clone()], device).unwrap());
            logits.into_data();
            prefix.push(t);
        }
        let logits = model.decode(&memory, token_tensor(&[prefix.clone()], device).unwrap());
        logits.into_data();
    });
    let per = |d: Duration| d.as_secs_f64() * 1e3 / len as f64;
    (per(cached), per(full))
}

fn main() {
    // `cargo bench` passes `--bench`; ignore arguments.
    let runs = if quick() { 1 } else { 5 };
    println!(
        "## CPU backend: burn-flex (preset `small`, {} threads)\n",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!("| backend | forward+backward, 32×24 tokens | greedy, 16 sentences × 30 tokens |");
    println!("|---|---|---|");
    let device = Device::flex();
    let train = train_step(&device, runs);
    let decode = greedy_decode(&device, runs.min(3));
    println!(
        "| flex | {:.1} ms | {:.1} ms |",
        train.as_secs_f64() * 1e3,
        decode.as_secs_f64() * 1e3
    );

    println!("\n## Decoder time per generated token, batch 1 (preset `small`, flex)\n");
    println!("| output length | with KV cache | without (full prefix each step) |");
    println!("|---|---|---|");
    let device = Device::flex();
    let model = Transformer::new(&ModelConfig::small(), &device)
        .unwrap()
        .valid();
    let lengths: &[usize] = if quick() { &[16] } else { &[16, 64, 128] };
    for &len in lengths {
        let (cached, full) = cache_vs_full(&model, &device, len, runs.min(3));
        println!("| {len} | {cached:.2} ms | {full:.2} ms |");
    }
}
