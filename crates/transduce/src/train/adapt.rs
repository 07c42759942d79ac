//! Adaptation: a shipped translator fine-tuned on a few of a user's own sentence pairs (a
//! name, a product, a house style), with the training step of §5 — teacher forcing,
//! label-smoothed cross-entropy (§5.4), Adam (§5.3) — at a low constant learning rate for
//! a few dozen steps. Each step mixes the user's pairs with as many general pairs (a replay
//! of the kind of data the model was trained on), so that it learns the new words without
//! forgetting the rest. The same code runs in `transduce adapt` and in the browser's worker;
//! a seed fixes the batches and the dropout masks.

use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::prelude::*;
use serde::{Deserialize, Serialize};

use super::{TeacherForced, adam, loss, teacher_forced};
use crate::bundle::{
    Adaptation, Bundle, BundleFiles, WEIGHTS_FILE, WeightDtype, save_weights_on_scales, sha256_hex,
};
use crate::model::token_tensor;
use crate::rng::Rng;
use crate::tokenizer::Tokenizer;
use crate::{BundleConfig, Error, Result, Task, Transformer};

/// One sentence pair and the line it came from (1-based; 0 where it had none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pair {
    pub source: String,
    pub target: String,
    pub line: usize,
}

/// The recipe. Defaults chosen by measurement (docs/RESULTS.md, "Adaptation").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct AdaptOptions {
    /// Optimizer steps.
    pub steps: usize,
    /// Adam's learning rate, constant.
    pub learning_rate: f64,
    /// The user's pairs in each step's batch (all of them when fewer).
    pub pairs_per_step: usize,
    /// General pairs in each step's batch (none when no replay pairs are given).
    pub replay_per_step: usize,
    /// Fixes the batches' order and the dropout masks.
    pub seed: u64,
}

impl Default for AdaptOptions {
    fn default() -> Self {
        AdaptOptions {
            steps: 30,
            learning_rate: 1e-4,
            pairs_per_step: 4,
            replay_per_step: 12,
            seed: 1,
        }
    }
}

impl AdaptOptions {
    /// Every value in range, or the one that is not.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, message: &str| Err(Error::invalid(field, message.to_string()));
        if self.steps == 0 || self.steps > 100_000 {
            return bad("steps", "must be between 1 and 100000");
        }
        if !(self.learning_rate > 0.0 && self.learning_rate < 1.0) {
            return bad("learningRate", "must be above 0 and below 1");
        }
        if self.pairs_per_step == 0 || self.pairs_per_step > 4096 {
            return bad("pairsPerStep", "must be between 1 and 4096");
        }
        if self.replay_per_step > 4096 {
            return bad("replayPerStep", "must be at most 4096");
        }
        Ok(())
    }
}

/// Sentence pairs from text, one `source<TAB>target` a line (two columns pasted from a
/// spreadsheet are this too). Blank lines are skipped; a byte-order mark is allowed. `name`
/// (a file name, a page field) starts every error, with the line: a line without a tab or
/// with two, an empty side, text that is not UTF-8, no pairs at all.
pub fn parse_pairs(bytes: &[u8], name: &str) -> Result<Vec<Pair>> {
    let place = |line: usize| format!("{name}, line {line}");
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        let column = at
            - bytes[..at]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1)
            + 1;
        Error::Pairs {
            place: place(line),
            message: format!(
                "not UTF-8 (byte 0x{:02X} at column {column}); save the file as UTF-8",
                bytes[at]
            ),
        }
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut pairs = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let fail = |message: &str| Error::Pairs {
            place: place(i + 1),
            message: message.to_string(),
        };
        let mut sides = line.split('\t');
        let (source, target) = match (sides.next(), sides.next(), sides.next()) {
            (Some(source), Some(target), None) => (source.trim(), target.trim()),
            (_, None, _) => {
                return Err(fail(
                    "no tab: write the source sentence, a tab, then its translation",
                ));
            }
            _ => {
                return Err(fail(
                    "more than one tab: one source and one translation a line",
                ));
            }
        };
        if source.is_empty() {
            return Err(fail("the source sentence (before the tab) is empty"));
        }
        if target.is_empty() {
            return Err(fail("the translation (after the tab) is empty"));
        }
        pairs.push(Pair {
            source: source.to_string(),
            target: target.to_string(),
            line: i + 1,
        });
    }
    if pairs.is_empty() {
        return Err(Error::Pairs {
            place: name.to_string(),
            message: "no sentence pairs (one `source<TAB>translation` a line)".into(),
        });
    }
    Ok(pairs)
}

/// A pair as token ids: the encoder's input and the target without BOS/EOS.
type Ids = (Vec<u32>, Vec<u32>);

/// What one step reports.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AdaptStep {
    /// Steps done (1-based).
    pub step: usize,
    pub steps: usize,
    /// The step's label-smoothed loss per target token.
    pub loss: f64,
}

/// A fine-tuning in progress: one [`Adapter::step`] at a time (the browser's worker yields
/// between steps, so a Cancel is heard), then [`Adapter::finish`] for the new bundle.
pub struct Adapter {
    config: BundleConfig,
    tokenizer_bytes: Vec<u8>,
    /// The weights adapted from: an int8 result keeps their scales.
    from_weights: Vec<u8>,
    from_sha256: String,
    stored: WeightDtype,
    model: Option<Transformer>,
    optimizer: ModuleOptimizer,
    device: Device,
    pairs: Vec<Ids>,
    replay: Vec<Ids>,
    options: AdaptOptions,
    rng: Rng,
    mine: Cycle,
    general: Cycle,
    done: usize,
}

/// Indices drawn in a shuffled order, reshuffled each time it runs out (epochs).
struct Cycle {
    order: Vec<usize>,
    next: usize,
}

impl Cycle {
    fn new(len: usize, rng: &mut Rng) -> Cycle {
        let mut order: Vec<usize> = (0..len).collect();
        rng.shuffle(&mut order);
        Cycle { order, next: 0 }
    }

    /// The next `count` indices (at most one pass's worth).
    fn draw(&mut self, rng: &mut Rng, count: usize) -> Vec<usize> {
        let mut out = Vec::with_capacity(count);
        for _ in 0..count.min(self.order.len()) {
            if self.next == self.order.len() {
                rng.shuffle(&mut self.order);
                self.next = 0;
            }
            out.push(self.order[self.next]);
            self.next += 1;
        }
        out
    }
}

impl Adapter {
    /// Starts from a translator bundle's files. Every pair must fit the model (its
    /// tokens within `max_len`); an error names the pair's line (`name`s: where `pairs`
    /// and `replay` came from).
    pub fn new(
        files: &BundleFiles,
        pairs: &[Pair],
        replay: &[Pair],
        names: (&str, &str),
        options: AdaptOptions,
    ) -> Result<Adapter> {
        options.validate()?;
        let device = Device::flex().autodiff();
        let (config, tokenizer, model, stored) = Bundle::parts(files, &device)?;
        if config.task == Task::Parse {
            return Err(Error::Input(
                "adaptation is for translators; this bundle is a parser".into(),
            ));
        }
        if config.model.word_focus {
            return Err(Error::Input(
                "adaptation does not support word-focus models".into(),
            ));
        }
        if pairs.is_empty() {
            return Err(Error::Pairs {
                place: names.0.to_string(),
                message: "no sentence pairs".into(),
            });
        }
        let encode = |list: &[Pair], name: &str| -> Result<Vec<Ids>> {
            list.iter()
                .map(|p| encode_pair(&tokenizer, &config, p, name))
                .collect()
        };
        let ids = encode(pairs, names.0)?;
        let replay_ids = encode(replay, names.1)?;
        let mut rng = Rng::new(options.seed);
        let mine = Cycle::new(ids.len(), &mut rng);
        let general = Cycle::new(replay_ids.len(), &mut rng);
        Ok(Adapter {
            tokenizer_bytes: files.tokenizer.clone(),
            from_weights: files.weights.clone(),
            from_sha256: config
                .adaptation
                .as_ref()
                .map(|a| a.from_sha256.clone())
                .unwrap_or_else(|| sha256_hex(&files.weights)),
            config,
            stored,
            model: Some(model),
            optimizer: adam(),
            device,
            pairs: ids,
            replay: replay_ids,
            options,
            rng,
            mine,
            general,
            done: 0,
        })
    }

    /// Steps the recipe takes.
    pub fn steps(&self) -> usize {
        self.options.steps
    }

    /// Steps taken.
    pub fn done(&self) -> usize {
        self.done
    }

    /// How the weights came (int8, f16, f32): [`Adapter::finish`]'s usual choice.
    pub fn stored(&self) -> WeightDtype {
        self.stored
    }

    /// One optimizer step on the next batch: the user's pairs and the replay's.
    pub fn step(&mut self) -> Result<AdaptStep> {
        if self.done >= self.options.steps {
            return Err(Error::Input("adaptation already finished".into()));
        }
        let mine = self.mine.draw(&mut self.rng, self.options.pairs_per_step);
        let general = self
            .general
            .draw(&mut self.rng, self.options.replay_per_step);
        let TeacherForced {
            sources: src,
            inputs: tgt_in,
            outputs: tgt_out,
        } = teacher_forced(
            mine.iter()
                .map(|&i| &self.pairs[i])
                .chain(general.iter().map(|&i| &self.replay[i]))
                .map(|(s, t)| (&s[..], &t[..])),
        );
        let tokens: usize = tgt_out.iter().map(Vec::len).sum();
        // Dropout masks from (seed, step) only: the same run gives the same weights.
        self.device.seed(
            self.options
                .seed
                .wrapping_mul(0x9E37_79B9)
                .wrapping_add(self.done as u64),
        );
        let (src, tgt_in, tgt_out) = (
            token_tensor(&src, &self.device)?,
            token_tensor(&tgt_in, &self.device)?,
            token_tensor(&tgt_out, &self.device)?,
        );
        let model = self
            .model
            .take()
            .ok_or_else(|| Error::Input("adaptation failed earlier".into()))?;
        let fused = model.fused();
        let sums = loss::label_smoothed(
            model.forward(src, tgt_in),
            tgt_out,
            self.config.model.label_smoothing,
            fused,
        );
        let loss = sums.smoothed.div_scalar(tokens as f64);
        let value = loss
            .clone()
            .inner()
            .into_data()
            .try_to_vec::<f32>()
            .map_err(|e| Error::Device(format!("{e:?}")))?[0] as f64;
        if !value.is_finite() {
            return Err(Error::Device(format!(
                "the loss is {value} at step {}: lower the learning rate",
                self.done + 1
            )));
        }
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        self.model = Some(
            self.optimizer
                .step(self.options.learning_rate, model, grads),
        );
        self.done += 1;
        Ok(AdaptStep {
            step: self.done,
            steps: self.options.steps,
            loss: value,
        })
    }

    /// The adapted bundle's files: the tokenizer as it came, the weights stored as `dtype`
    /// (int8 on the scales of the weights adapted from, where rows fit them),
    /// `config.json` recording the adaptation ([`Adaptation`]) with fresh checksums.
    pub fn finish(self, dtype: WeightDtype) -> Result<BundleFiles> {
        let model = self
            .model
            .ok_or_else(|| Error::Input("adaptation failed earlier".into()))?;
        // In int8, rows stay on the scales they came with where they fit: weights that moved
        // less than half a step are exactly as they shipped.
        let weights = save_weights_on_scales(&model, dtype, Some(&self.from_weights))?;
        let mut config = self.config;
        config.weights = Some(dtype);
        let earlier = config.adaptation.take();
        config.adaptation = Some(Adaptation {
            pairs: self.pairs.len() + earlier.as_ref().map_or(0, |a| a.pairs),
            replay: self.replay.len(),
            steps: self.done + earlier.as_ref().map_or(0, |a| a.steps),
            learning_rate: self.options.learning_rate,
            seed: self.options.seed,
            from_sha256: self.from_sha256,
        });
        config
            .sha256
            .insert(WEIGHTS_FILE.to_string(), sha256_hex(&weights));
        Ok(BundleFiles {
            config: config.to_json().into_bytes(),
            tokenizer: self.tokenizer_bytes,
            weights,
        })
    }
}

/// A pair's ids, or an error naming its line when it is longer than the model takes.
fn encode_pair(
    tokenizer: &Tokenizer,
    config: &BundleConfig,
    pair: &Pair,
    name: &str,
) -> Result<Ids> {
    let place = || match pair.line {
        0 => name.to_string(),
        line => format!("{name}, line {line}"),
    };
    let src = tokenizer.encode(&pair.source)?;
    let tgt = tokenizer.encode(&pair.target)?;
    let max = config.model.max_len;
    // The decoder reads BOS + target and predicts target + EOS.
    for (side, len) in [("source", src.len()), ("translation", tgt.len() + 1)] {
        if len > max {
            return Err(Error::Pairs {
                place: place(),
                message: format!("the {side} is {len} tokens, longer than the model's {max}"),
            });
        }
    }
    if src.is_empty() || tgt.is_empty() {
        return Err(Error::Pairs {
            place: place(),
            message: "a side has no tokens the model knows".into(),
        });
    }
    // The encoder reads the source closed by EOS where the model's sources end with it.
    Ok((config.model.source_row(&src), tgt))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::{BundleFiles, Provenance};
    use crate::decode::DecodeOptions;
    use crate::host::int8::{quantize_row, quantize_row_on};
    use crate::{Bundle, ModelConfig};
    use safetensors::{Dtype, SafeTensors};

    /// A tiny untrained model with the given vocabulary, seeded.
    fn tiny_model(vocab: usize, seed: u64) -> Transformer {
        let device = Device::flex();
        device.seed(seed);
        Transformer::new(&ModelConfig::tiny().with_vocab(vocab), &device).unwrap()
    }

    /// An en→de bundle of a model in memory.
    fn translation_bundle(tokenizer: Tokenizer, model: Transformer) -> Bundle {
        let config = BundleConfig {
            format: crate::bundle::BUNDLE_FORMAT,
            task: Task::Translate {
                source: "en".into(),
                target: "de".into(),
            },
            model: model.config().clone(),
            decoding: DecodeOptions::default(),
            provenance: Provenance::default(),
            weights: None,
            metrics: Default::default(),
            sha256: Default::default(),
            channel: None,
            adaptation: None,
        };
        Bundle::new(config, tokenizer, model).unwrap()
    }

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
        let model = tiny_model(tokenizer.vocab_size(), 3);
        translation_bundle(tokenizer, model)
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
            let mut adapter =
                Adapter::new(&files, &pairs(), &[], ("pairs.tsv", ""), options).unwrap();
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

        let config = BundleConfig::from_json(&out.config).unwrap();
        let adaptation = config.adaptation.unwrap();
        assert_eq!(
            (adaptation.pairs, adaptation.replay, adaptation.steps),
            (2, 0, 25)
        );
        assert_eq!(adaptation.from_sha256, sha256_hex(&files.weights));
        // The result loads as a bundle (checksums, config) and its tokenizer is the one it came with.
        Bundle::from_bytes(&out, &Device::flex()).unwrap();
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
}
