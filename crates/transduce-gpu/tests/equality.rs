//! The GPU decoder against the host decoder: the same outputs, greedy and beam 4, for the
//! shipped translators (both directions) and the parser's constrained decoding (§6.3), and
//! for small random models with the configurations the shipped ones do not use.
//!
//! Runs on whatever adapter wgpu finds: lavapipe (software Vulkan) in CI. Skips visibly when
//! there is none.

use std::path::PathBuf;

use transduce::bundle::{WeightDtype, load_weights, save_weights};
use transduce::burn::prelude::*;
use transduce::decode::{self, DecodeOptions};
use transduce::task::Parser;
use transduce::{Bundle, BundleFiles, HostModel, ModelConfig, Positional, Transformer};
use transduce_gpu::{Gpu, GpuModel, WeightStorage};

/// This package's folder as `cargo test` gives it at run time, so that a build cache shared by
/// two checkouts tests the files of the one it runs in; the compile-time path otherwise.
fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

fn repo() -> PathBuf {
    manifest_dir().join("../..")
}

fn gpu() -> Option<Gpu> {
    match pollster::block_on(Gpu::new(true)) {
        Ok(gpu) => {
            eprintln!("GPU decoder tests on {:?}", gpu.summary());
            Some(gpu)
        }
        Err(e) => {
            eprintln!("SKIP: GPU decoder equality tests: {e}");
            None
        }
    }
}

fn bundle(id: &str) -> Bundle {
    let dir = repo().join("web/models").join(id);
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    let files = BundleFiles {
        config: read("config.json"),
        tokenizer: read("tokenizer.json"),
        weights: read("model.safetensors"),
    };
    let mut bundle = Bundle::from_bytes(&files, &Device::flex()).unwrap();
    // The GPU decoder multiplies in f32 (an int8 bundle's weights as q·scale): its
    // reference is the host decoder's f32 arithmetic, not its int8 products.
    bundle.dequantize();
    bundle
}

fn lines(name: &str) -> Vec<String> {
    std::fs::read_to_string(repo().join("tests/fixtures").join(name))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Host and GPU outputs of `sources`, greedy and beam 4, in one batch and one at a time.
fn assert_same(host: &HostModel, gpu: &GpuModel, sources: &[Vec<u32>], alpha: f64, what: &str) {
    for beam in [1, 4] {
        let options = DecodeOptions {
            beam,
            alpha,
            max_extra: 50,
        };
        let want = decode::best_outputs(host, sources, &options, None).unwrap();
        let batched = pollster::block_on(gpu.best_outputs(sources, &options, None)).unwrap();
        for (i, (w, g)) in want.iter().zip(&batched).enumerate() {
            assert_eq!(w, g, "{what}, beam {beam}, line {i} (batched)");
        }
        for (i, source) in sources.iter().enumerate().take(3) {
            let one =
                pollster::block_on(gpu.best_outputs(std::slice::from_ref(source), &options, None))
                    .unwrap();
            assert_eq!(want[i], one[0], "{what}, beam {beam}, line {i} (alone)");
        }
    }
}

#[test]
fn shipped_translators_decode_as_the_host_does() {
    let Some(gpu) = gpu() else { return };
    for (id, input) in [
        ("en-de", "browser-sentences.en"),
        ("de-en", "browser-sentences.de"),
    ] {
        let bundle = bundle(id);
        let host = bundle.host().unwrap();
        let model = GpuModel::new(&gpu, host);
        // The shipped bundles are int8: the GPU holds them as int8 too.
        assert_eq!(model.storage(), WeightStorage::Int8, "{id}");
        let sources: Vec<Vec<u32>> = lines(input)
            .iter()
            .map(|l| bundle.tokenizer.encode(l).unwrap())
            .collect();
        assert_same(host, &model, &sources, bundle.config.decoding.alpha, id);
        let counts = model.counts();
        let (dispatches, _, _) = counts.per_step();
        // Embedding, 8 per layer, projection, the top-k's two passes, and the history of
        // beam reordering.
        let layers = host.config().n_layers as f64;
        assert_eq!(dispatches, 5.0 + 8.0 * layers, "{id}: dispatches per step");
        // Beam search submits and reads every step; greedy submits groups of steps (of 1
        // near the sentences' expected end: 13 submits for 41 steps here).
        for (beam, most) in [(4, 1.0), (1, 0.5)] {
            model.reset_counts();
            let options = DecodeOptions {
                beam,
                ..bundle.config.decoding.clone()
            };
            pollster::block_on(model.best_outputs(&sources, &options, None)).unwrap();
            let (_, submits, _) = model.counts().per_step();
            assert!(
                submits <= most,
                "{id}, beam {beam}: {submits} submits per step ({:?})",
                model.counts()
            );
        }
    }
}

#[test]
fn parser_decodes_under_its_constraint_as_the_host_does() {
    let Some(gpu) = gpu() else { return };
    let bundle = bundle("ptb-parser");
    let host = bundle.host().unwrap();
    let model = GpuModel::new(&gpu, host);
    assert_eq!(model.storage(), WeightStorage::Int8);
    let parser = Parser::new(&bundle).unwrap();
    let sentences: Vec<Vec<String>> = [
        "The dog saw a man in the park .",
        "Stocks fell sharply on Monday after the report .",
        "He said the company would not comment .",
    ]
    .iter()
    .map(|s| s.split(' ').map(str::to_string).collect())
    .collect();
    for beam in [1, 4, bundle.config.decoding.beam] {
        let options = DecodeOptions {
            beam,
            ..bundle.config.decoding.clone()
        };
        let want = parser
            .parse_with(&bundle.tokenizer, host, &sentences, &options, true)
            .unwrap();
        let got = pollster::block_on(parser.parse_by(
            &bundle.tokenizer,
            &[host.config()],
            &sentences,
            &options,
            true,
            async |sources: &[Vec<u32>], constraint: &dyn decode::Constraint| {
                model
                    .best_outputs(sources, &options, Some(constraint))
                    .await
            },
        ))
        .unwrap();
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            assert_eq!(w.tree, g.tree, "parser, beam {beam}, sentence {i}");
            assert!(g.well_formed);
        }
    }
}

#[test]
fn random_models_of_other_shapes_decode_as_the_host_does() {
    let Some(gpu) = gpu() else { return };
    let device = Device::flex();
    let configs = [
        // Learned positions, separate embeddings and projection, d_k ≠ d_v.
        ModelConfig {
            positional: Positional::Learned,
            share_embeddings: false,
            d_k: 12,
            d_v: 20,
            max_len: 64,
            ..ModelConfig::tiny().with_vocab(97)
        },
        ModelConfig::tiny().with_vocab(300),
    ];
    for (i, config) in configs.iter().enumerate() {
        device.seed(7 + i as u64);
        let model = Transformer::new(config, &device).unwrap();
        // The f32 weights, and the same model through an int8 bundle (weights q·scale).
        let int8 = save_weights(&model, WeightDtype::Int8).unwrap();
        let int8 = load_weights(config, &int8, &device).unwrap();
        for (model, storage) in [(model, WeightStorage::F32), (int8, WeightStorage::Int8)] {
            let host = HostModel::new(&model).unwrap();
            let gpu_model = GpuModel::new(&gpu, &host);
            assert_eq!(gpu_model.storage(), storage, "random model {i}");
            let vocab = config.vocab_size as u32;
            let sources: Vec<Vec<u32>> = (0..6)
                .map(|s| {
                    (0..3 + 2 * s)
                        .map(|j| 4 + ((s * 31 + j * 17) as u32 % (vocab - 4)))
                        .collect()
                })
                .collect();
            assert_same(
                &host,
                &gpu_model,
                &sources,
                0.6,
                &format!("random model {i}, {storage} weights"),
            );
        }
    }
}

/// The serial depth of a decoder step (greedy, one 20-token sentence, step 20) read from the
/// dispatches the decoder records, against the count by hand from the kernels' loops for
/// `small` (d_model 256, d_ff 1024, 3 layers, 4 heads of 64, 8,000 words):
/// - history 1; embedding ⌈256/64⌉ = 4;
/// - per layer: Q/K/V, cross queries and the FFN's first product, each one of 8 slices of
///   K = 256 (int8: 64 words → 8) + 1 epilogue pair = 9; the output and cross projections
///   with LayerNorm, one of 8 slices (64 words → 8) + 2 rows × 2 × ⌈256/256⌉ = 12; the
///   FFN's second, 1024/4/8 + 4 = 36; two attentions over 20 keys, sixteen threads to a
///   key and four to a value dimension, ⌈20/16⌉·⌈64/16⌉ + ⌈64/64⌉·⌈20/4⌉ = 13 each:
///   3 × 9 + 2 × 12 + 36 + 2 × 13 = 113;
/// - the output projection 9; the top-1 selection over ⌈8000/1024⌉ = 8 parts of 1,024
///   words, (2 + 1)·⌈1024/256⌉ = 12, and their merge, 2·⌈8/256⌉ + 1·⌈8·1/256⌉ = 3.
///
/// int8: 1 + 4 + 3 × 113 + 9 + 12 + 3 = 368. f32 reads K values, not K/4 words: per layer
/// 3 × (32 + 1) + 2 × (32 + 4) + (128 + 4) + 2 × 13 = 329, total 1,040.
#[test]
fn serial_depth_is_counted_from_the_recorded_dispatches() {
    let Some(gpu) = gpu() else { return };
    let device = Device::flex();
    device.seed(3);
    let config = ModelConfig::small();
    let model = Transformer::new(&config, &device).unwrap();
    let int8 = save_weights(&model, WeightDtype::Int8).unwrap();
    let int8 = load_weights(&config, &int8, &device).unwrap();
    for (model, want) in [(model, 1_040), (int8, 368)] {
        let host = HostModel::new(&model).unwrap();
        let gpu_model = GpuModel::new(&gpu, &host);
        let depth = gpu_model.serial_depth().unwrap();
        assert_eq!(depth, want, "{} weights", gpu_model.storage());
    }
}

/// `GpuModel::profile` times every dispatch of a step: as many calls per step as the step
/// records (the history, the embedding, 8 per layer, the projection and the top-k's two
/// passes), named
/// by what they compute, each with a time. Skips where the adapter has no timestamps.
#[test]
fn profile_times_every_dispatch_of_a_step() {
    let Some(gpu) = gpu() else { return };
    let device = Device::flex();
    device.seed(5);
    let config = ModelConfig::tiny().with_vocab(300);
    let model = Transformer::new(&config, &device).unwrap();
    let host = HostModel::new(&model).unwrap();
    let gpu_model = GpuModel::new(&gpu, &host);
    let Some(profile) = pollster::block_on(gpu_model.profile(2, 4, 3)).unwrap() else {
        eprintln!("SKIP: profile_times_every_dispatch_of_a_step: no timestamp queries");
        return;
    };
    assert_eq!(profile.steps, 3);
    let layers = config.n_layers as u64;
    let calls: u64 = profile.kernels.iter().map(|k| k.calls).sum();
    assert_eq!(calls, 3 * (5 + 8 * layers), "{profile:?}");
    let names: Vec<&str> = profile.kernels.iter().map(|k| k.name).collect();
    assert_eq!(
        names,
        [
            "history",
            "embedding",
            "self Q/K/V",
            "self-attention",
            "self out + norm",
            "cross Q",
            "cross-attention",
            "cross out + norm",
            "FFN inner (ReLU)",
            "FFN outer + norm",
            "output projection",
            "log-softmax + top-k",
            "top-k merge"
        ]
    );
    for k in &profile.kernels {
        let per_step = if k.name.contains("history")
            || k.name.contains("embedding")
            || k.name.contains("output")
            || k.name.contains("top-k")
        {
            1
        } else {
            layers
        };
        assert_eq!(k.calls, 3 * per_step, "{}", k.name);
        assert!(k.total_us.is_finite() && k.total_us >= 0.0, "{k:?}");
    }
    assert!(profile.step_us() > 0.0, "{profile:?}");
}
