//! Adaptation (`transduce::train::adapt`): the pair format and its errors, the training
//! steps on a tiny model, determinism, and int8 storage on the scales adapted from.

mod common;

use safetensors::{Dtype, SafeTensors};
use transduce::bundle::{BundleFiles, WeightDtype};
use transduce::host::int8::{quantize_row, quantize_row_on};
use transduce::train::adapt::{AdaptOptions, Adapter, Pair, parse_pairs};
use transduce::{Error, Tokenizer};

fn tokenizer() -> Tokenizer {
    let text = [
        "the cat sat on the mat",
        "die katze sass auf der matte",
        "a dog runs in the park",
        "ein hund rennt im park",
        "vienna wien berlin",
    ];
    Tokenizer::train(text.iter(), 60).unwrap()
}

fn tiny_bundle(dtype: WeightDtype) -> BundleFiles {
    let tokenizer = tokenizer();
    let model = common::tiny_model(tokenizer.vocab_size(), 3);
    common::translation_bundle(tokenizer, model)
        .to_bytes(dtype)
        .unwrap()
}

fn pairs() -> Vec<Pair> {
    parse_pairs(
        "the cat sat on the mat\tdie katze sass auf der matte\na dog runs in the park\tein hund rennt im park\n"
            .as_bytes(),
        "pairs.tsv",
    )
    .unwrap()
}

fn message(e: Error) -> String {
    e.to_string()
}

#[test]
fn pairs_parse_with_lines_and_bad_ones_name_their_line() {
    let p = parse_pairs(
        "\u{feff}Hallo\tHello\r\n\n  \nWien ist schön.\t Vienna is lovely. \n".as_bytes(),
        "p.tsv",
    )
    .unwrap();
    assert_eq!(
        p,
        vec![
            Pair {
                source: "Hallo".into(),
                target: "Hello".into(),
                line: 1
            },
            Pair {
                source: "Wien ist schön.".into(),
                target: "Vienna is lovely.".into(),
                line: 4
            },
        ]
    );
    let err = |text: &[u8]| message(parse_pairs(text, "p.tsv").unwrap_err());
    assert_eq!(
        err(b"a\tb\nc d\n"),
        "p.tsv, line 2: no tab: write the source sentence, a tab, then its translation"
    );
    assert_eq!(
        err(b"a\tb\tc\n"),
        "p.tsv, line 1: more than one tab: one source and one translation a line"
    );
    assert_eq!(
        err(b" \tb\n"),
        "p.tsv, line 1: the source sentence (before the tab) is empty"
    );
    assert_eq!(
        err(b"a\t\n"),
        "p.tsv, line 1: the translation (after the tab) is empty"
    );
    assert_eq!(
        err(b"a\tb\nxy\xFFz\tc\n"),
        "p.tsv, line 2: not UTF-8 (byte 0xFF at column 3); save the file as UTF-8"
    );
    assert_eq!(
        err(b""),
        "p.tsv: no sentence pairs (one `source<TAB>translation` a line)"
    );
}

/// A row given back as q·scale re-quantizes to q on that scale, whatever rounding of the
/// product; a row past the scale's range gets a scale of its own.
#[test]
fn rows_requantize_exactly_on_their_scale() {
    let row: Vec<f32> = (0..37)
        .map(|i| ((i * 7919) % 255) as f32 / 100.0 - 1.27)
        .collect();
    let mut q = vec![0i8; row.len()];
    let scale = quantize_row(&row, &mut q);
    let back: Vec<f32> = q.iter().map(|&v| v as f32 * scale).collect();
    let mut again = vec![0i8; row.len()];
    assert_eq!(quantize_row_on(&back, &mut again, scale), Some(()));
    assert_eq!(again, q);
    // Nudged by a tenth of a step: still the same values.
    let nudged: Vec<f32> = back.iter().map(|v| v + 0.1 * scale).collect();
    quantize_row_on(&nudged, &mut again, scale).unwrap();
    assert_eq!(again, q);
    let grown: Vec<f32> = back.iter().map(|v| v * 1.1).collect();
    assert_eq!(quantize_row_on(&grown, &mut again, scale), None);
    assert_eq!(quantize_row_on(&back, &mut again, 0.0), None);
}

/// The model learns its pairs (the loss falls), the same seed gives the same weights bit for
/// bit and another seed others, and the bundle records what was done.
#[test]
fn adapter_learns_deterministically() {
    let files = tiny_bundle(WeightDtype::F32);
    let options = AdaptOptions {
        steps: 25,
        learning_rate: 3e-3,
        ..AdaptOptions::default()
    };
    let run = |options: AdaptOptions| {
        let mut adapter = Adapter::new(&files, &pairs(), &[], ("pairs.tsv", ""), options).unwrap();
        let losses: Vec<f64> = (0..adapter.steps())
            .map(|_| adapter.step().unwrap().loss)
            .collect();
        assert!(adapter.step().is_err(), "a step past the recipe");
        (losses, adapter.finish(WeightDtype::F32).unwrap())
    };
    let (losses, out) = run(options.clone());
    assert!(losses.iter().all(|l| l.is_finite()));
    assert!(losses[24] < 0.5 * losses[0], "{losses:?}");
    let (losses2, out2) = run(options.clone());
    assert_eq!(losses, losses2);
    assert_eq!(out.weights, out2.weights);
    let (_, other) = run(AdaptOptions { seed: 2, ..options });
    assert_ne!(out.weights, other.weights);

    let config = transduce::BundleConfig::from_json(&out.config).unwrap();
    let adaptation = config.adaptation.unwrap();
    assert_eq!(
        (adaptation.pairs, adaptation.replay, adaptation.steps),
        (2, 0, 25)
    );
    assert_eq!(
        adaptation.from_sha256,
        transduce::bundle::sha256_hex(&files.weights)
    );
    // The result loads as a bundle (checksums, config) and its tokenizer is the one it came with.
    transduce::Bundle::from_bytes(&out, &common::device()).unwrap();
    assert_eq!(out.tokenizer, files.tokenizer);
}

/// In int8, rows stay on the scales they shipped with: one step of Adam moves every weight
/// by about the learning rate, 1e-4, less than half a step of these rows (about 1e-3), so
/// every int8 matrix and scale comes back exactly. (Scales of their own would follow each
/// row's moved maximum.)
#[test]
fn int8_results_keep_the_shipped_scales() {
    let files = tiny_bundle(WeightDtype::Int8);
    let options = AdaptOptions {
        steps: 1,
        learning_rate: 1e-4,
        ..AdaptOptions::default()
    };
    let mut adapter = Adapter::new(&files, &pairs(), &[], ("pairs.tsv", ""), options).unwrap();
    adapter.step().unwrap();
    let out = adapter.finish(WeightDtype::Int8).unwrap();
    let (before, after) = (
        SafeTensors::deserialize(&files.weights).unwrap(),
        SafeTensors::deserialize(&out.weights).unwrap(),
    );
    let mut matrices = 0;
    for (name, view) in before.tensors() {
        let quantized = view.dtype() == Dtype::I8 || name.ends_with("_scale");
        if quantized {
            matrices += 1;
            assert_eq!(view.data(), after.tensor(&name).unwrap().data(), "{name}");
        }
    }
    assert!(matrices > 10, "{matrices}");
}

#[test]
fn bad_bundles_pairs_and_options_are_errors() {
    let files = tiny_bundle(WeightDtype::F32);
    let new = |pairs: &[Pair], options: AdaptOptions| {
        Adapter::new(&files, pairs, &[], ("pairs.tsv", ""), options)
            .err()
            .map(message)
    };
    assert_eq!(
        new(&[], AdaptOptions::default()).unwrap(),
        "pairs.tsv: no sentence pairs"
    );
    let long = Pair {
        source: vec!["cat"; 600].join(" "),
        target: "katze".into(),
        line: 7,
    };
    let err = new(&[long], AdaptOptions::default()).unwrap();
    assert!(err.starts_with("pairs.tsv, line 7: the source is"), "{err}");
    for (options, field) in [
        (
            AdaptOptions {
                steps: 0,
                ..AdaptOptions::default()
            },
            "steps",
        ),
        (
            AdaptOptions {
                learning_rate: -1.0,
                ..AdaptOptions::default()
            },
            "learningRate",
        ),
        (
            AdaptOptions {
                learning_rate: f64::NAN,
                ..AdaptOptions::default()
            },
            "learningRate",
        ),
        (
            AdaptOptions {
                pairs_per_step: 0,
                ..AdaptOptions::default()
            },
            "pairsPerStep",
        ),
    ] {
        let err = new(&pairs(), options).unwrap();
        assert!(err.contains(field), "{err}");
    }
    let mut broken = files.clone();
    broken.weights.truncate(100);
    let err = Adapter::new(
        &broken,
        &pairs(),
        &[],
        ("pairs.tsv", ""),
        AdaptOptions::default(),
    )
    .err()
    .map(message)
    .unwrap();
    assert!(err.contains("sha256"), "{err}");
}
