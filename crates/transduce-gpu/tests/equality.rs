//! The GPU decoder against the host decoder: the same outputs, greedy and beam 4, for the
//! shipped translators (both directions) and the parser's constrained decoding (§6.3), and
//! for small random models with the configurations the shipped ones do not use.
//!
//! Runs on whatever adapter wgpu finds: lavapipe (software Vulkan) in CI. Skips visibly when
//! there is none.

use transduce::bundle::{WeightDtype, load_weights, save_weights};
use transduce::burn::module::Param;
use transduce::burn::prelude::*;
use transduce::burn::tensor::Distribution;
use transduce::config::Activation;
use transduce::decode::{self, DecodeOptions, LengthNorm};
use transduce::task::Parser;
use transduce::{Bundle, BundleFiles, HostModel, ModelConfig, Positional, Transformer};
use transduce_gpu::{Gpu, GpuModel, WeightStorage};
use transduce_testing::repo_root;

fn gpu() -> Option<Gpu> {
    match pollster::block_on(Gpu::new(true)) {
        Ok(gpu) => {
            eprintln!("GPU decoder tests on {:?}", gpu.summary());
            Some(gpu)
        }
        Err(e) => {
            transduce_testing::skip(format_args!("GPU decoder equality tests: {e}"));
            None
        }
    }
}

fn bundle(id: &str) -> Bundle {
    let dir = repo_root().join("web/models").join(id);
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
    std::fs::read_to_string(repo_root().join("tests/fixtures").join(name))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Host and GPU outputs of `sources`, greedy and beam 4, in one batch and one at a time
/// (from 8 rows the products take their wide geometry, below it the split-K one: both are
/// checked).
fn assert_same(host: &HostModel, gpu: &GpuModel, sources: &[Vec<u32>], alpha: f64, what: &str) {
    for beam in [1, 4] {
        let options = DecodeOptions {
            beam,
            alpha,
            max_extra: 50,
            // Models of an imported layout rank beams as transformers' generate does.
            length_norm: if host.config().source_eos {
                LengthNorm::Power
            } else {
                LengthNorm::Gnmt
            },
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
        // Embedding, 11 per layer (three products each followed by the residual and
        // LayerNorm, two more products, two attentions), projection, the top-k's two
        // passes, and the history of beam reordering.
        let layers = host.config().n_layers as f64;
        assert_eq!(dispatches, 5.0 + 11.0 * layers, "{id}: dispatches per step");
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
fn an_int8_bundle_goes_up_from_its_integers_without_an_f32_copy() {
    let Some(gpu) = gpu() else { return };
    // The shipped translators, read in int8 only.
    for id in ["en-de", "de-en-free"] {
        let bundle = bundle(id);
        let host = bundle.host().unwrap();
        assert!(
            !host.has_f32(),
            "{id}: f32 products over the int8 arrays, no f32 copy"
        );
        let expanded = host.expanded();
        assert!(expanded.has_f32());
        let direct = GpuModel::new(&gpu, host);
        let widened = GpuModel::new(&gpu, &expanded);
        assert_eq!(direct.storage(), WeightStorage::Int8, "{id}");
        assert_eq!(
            direct.weight_bytes(),
            widened.weight_bytes(),
            "{id}: the same buffers"
        );
        let sources: Vec<Vec<u32>> = lines("browser-sentences.en")
            .iter()
            .take(12)
            .map(|l| bundle.tokenizer.encode(l).unwrap())
            .collect();
        let options = DecodeOptions {
            beam: 4,
            max_extra: 50,
            ..DecodeOptions::default()
        };
        let a = pollster::block_on(direct.best_outputs(&sources, &options, None)).unwrap();
        let b = pollster::block_on(widened.best_outputs(&sources, &options, None)).unwrap();
        assert_eq!(
            a, b,
            "{id}: uploaded from the integers or from a widened copy"
        );
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
        // Inner dimensions that are not multiples of four (d_model 30, h·d_v 27, d_ff 50:
        // the products' last word is part padding; f32 only, int8 needs whole words),
        // heads whose queries, keys and values are not vec4-aligned (d_k 7, d_v 9), and a
        // vocabulary of two top-k parts, the second short.
        ModelConfig {
            d_model: 30,
            d_ff: 50,
            n_heads: 3,
            d_k: 7,
            d_v: 9,
            ..ModelConfig::tiny().with_vocab(1500)
        },
        // An imported Marian student's layout: swish, attention and output biases, sources
        // closed by EOS, fewer decoder layers than encoder layers; beams ranked by |Y|^α as
        // transformers' generate ranks them.
        ModelConfig {
            n_layers: 3,
            decoder_layers: Some(1),
            activation: Activation::Swish,
            attention_bias: true,
            output_bias: true,
            source_eos: true,
            ..ModelConfig::tiny().with_vocab(211)
        },
    ];
    for (i, config) in configs.iter().enumerate() {
        device.seed(7 + i as u64);
        let mut model = Transformer::new(config, &device).unwrap();
        // The output bias starts at zero: random values, so a decoder that drops it differs.
        if let Some(bias) = &model.output_bias {
            let values = bias.val().random_like(Distribution::Normal(0.0, 1.0));
            model.output_bias = Some(Param::from_tensor(values));
        }
        // The f32 weights, and the same model through an int8 bundle (weights q·scale) and
        // an f16 one (held as f16 where the adapter has shader-f16).
        let int8 = save_weights(&model, WeightDtype::Int8).unwrap();
        let int8 = load_weights(config, &int8, &device).unwrap();
        let f16 = save_weights(&model, WeightDtype::F16).unwrap();
        let f16 = load_weights(config, &f16, &device).unwrap();
        let f16_storage = if gpu.summary().f16 {
            WeightStorage::F16
        } else {
            WeightStorage::F32
        };
        let whole_words = [config.d_model, config.d_ff, config.n_heads * config.d_v]
            .iter()
            .all(|k| k.is_multiple_of(4));
        let int8_storage = if whole_words {
            WeightStorage::Int8
        } else {
            WeightStorage::F32
        };
        for (model, storage) in [
            (model, WeightStorage::F32),
            (int8, int8_storage),
            (f16, f16_storage),
        ] {
            let host = HostModel::new(&model).unwrap();
            let gpu_model = GpuModel::new(&gpu, &host);
            assert_eq!(gpu_model.storage(), storage, "random model {i}");
            let vocab = config.vocab_size as u32;
            let sources: Vec<Vec<u32>> = (0..6)
                .map(|s| {
                    (0..3 + 4 * s)
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
/// `small` (d_model 256, d_ff 1024, 3 layers, 4 heads of 64, 8,000 words). Every product
/// reads words of four inputs, ⌈K/4⌉ of them, in as many slices as give a thread at most 4
/// words (8 to 32 slices), so f32 and int8 weights count the same:
/// - history 1; embedding ⌈256/256⌉ = 1;
/// - per layer: Q/K/V, the self-attention's output, cross queries, the cross-attention's
///   output and the FFN's first product, each K = 256: 64 words in 16 slices, 4, + 1 for
///   the epilogue's 8 pairs = 5; the FFN's second, K = 1024: 256 words in 32 slices, 8 + 1
///   = 9; three residual + LayerNorm, 2 × ⌈256/256⌉ = 2 each; two attentions over 20 keys,
///   sixteen threads to a key (⌈20/16⌉ × ⌈16 words/16⌉ = 2) and sixteen to four value
///   dimensions (⌈16/16⌉ × ⌈20/16⌉ = 2), 4 each: 5 × 5 + 9 + 3 × 2 + 2 × 4 = 48;
/// - the output projection 5; the top-1 selection, one pass over its ⌈8000/1024⌉ = 8
///   parts' 1,024 words, ⌈1024/256⌉ = 4, and their merge, 2·⌈8/256⌉ + 1·⌈8·1/256⌉ = 3.
///
/// 1 + 1 + 3 × 48 + 5 + 4 + 3 = 158.
#[test]
fn serial_depth_is_counted_from_the_recorded_dispatches() {
    let Some(gpu) = gpu() else { return };
    let device = Device::flex();
    device.seed(3);
    let config = ModelConfig::small();
    let model = Transformer::new(&config, &device).unwrap();
    let int8 = save_weights(&model, WeightDtype::Int8).unwrap();
    let int8 = load_weights(&config, &int8, &device).unwrap();
    for model in [model, int8] {
        let host = HostModel::new(&model).unwrap();
        let gpu_model = GpuModel::new(&gpu, &host);
        let depth = gpu_model.serial_depth().unwrap();
        assert_eq!(depth, 158, "{} weights", gpu_model.storage());
    }
}

/// The serial-depth goals of a decoder step at batch 1: `compact` ≤ 200, `small` ≤ 250,
/// `base` ≤ 600 (the step before split-K products, vec4 loads and the one-pass top-k:
/// 803, 1,040 and 3,863 in f32).
#[test]
fn serial_depth_meets_its_goals_for_the_presets() {
    let Some(gpu) = gpu() else { return };
    let device = Device::flex();
    device.seed(4);
    for (config, goal) in [
        (ModelConfig::compact(), 200),
        (ModelConfig::small(), 250),
        (ModelConfig::base(), 600),
    ] {
        let model = Transformer::new(&config, &device).unwrap();
        let host = HostModel::new(&model).unwrap();
        let gpu_model = GpuModel::new(&gpu, &host);
        let depth = gpu_model.serial_depth().unwrap();
        eprintln!(
            "serial depth, d_model {}, {} layers: {depth} (goal {goal})",
            config.d_model, config.n_layers
        );
        assert!(
            depth <= goal,
            "d_model {}: {depth} > {goal}",
            config.d_model
        );
    }
}

/// `GpuModel::profile` times every dispatch of a step: as many calls per step as the step
/// records (the history, the embedding, 11 per layer, the projection and the top-k's two
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
        transduce_testing::skip(format_args!(
            "profile_times_every_dispatch_of_a_step: no timestamp queries"
        ));
        return;
    };
    assert_eq!(profile.steps, 3);
    let layers = config.n_layers as u64;
    let calls: u64 = profile.kernels.iter().map(|k| k.calls).sum();
    assert_eq!(calls, 3 * (5 + 11 * layers), "{profile:?}");
    let names: Vec<&str> = profile.kernels.iter().map(|k| k.name).collect();
    assert_eq!(
        names,
        [
            "history",
            "embedding",
            "self Q/K/V",
            "self-attention",
            "self out",
            "self residual + norm",
            "cross Q",
            "cross-attention",
            "cross out",
            "cross residual + norm",
            "FFN inner (ReLU)",
            "FFN outer",
            "FFN residual + norm",
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
        assert!(k.depth >= k.calls, "{k:?}: every dispatch loads");
    }
    assert!(profile.step_us() > 0.0, "{profile:?}");
}
