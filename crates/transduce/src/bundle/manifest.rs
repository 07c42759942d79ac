//! A bundle's manifest, `config.json`: its task, model configuration, decoding defaults,
//! provenance, licence and card fields, and the storage precision of its weights.

use crate::config::ModelConfig;
use crate::decode::DecodeOptions;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the bundle layout this crate writes and reads.
pub const BUNDLE_FORMAT: u32 = 1;

/// What a bundle's model does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Task {
    /// Translation from `source` to `target` language (ISO 639-1 codes).
    Translate { source: String, target: String },
    /// English constituency parsing (§6.3): words in, linearized tree out.
    Parse,
}

/// Where a model came from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Provenance {
    /// Program and version that produced the weights.
    pub created_by: String,
    /// Training data, as paths or names.
    pub data: Vec<String>,
    /// Commands that reproduce the bundle.
    pub commands: Vec<String>,
    /// Optimizer steps.
    pub steps: u64,
    /// Wall-clock training time in seconds.
    pub training_seconds: f64,
    /// Free-form notes (hardware, averaging, ...).
    pub notes: String,
    /// The model these weights were imported from (e.g. `Helsinki-NLP/opus-mt-en-de`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub imported_from: String,
    /// The weights' licence (an SPDX id such as `cc-by-4.0`), where it is not this
    /// project's: what a site that ships the bundle must honour.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub licence: String,
    /// The recipe stage that made the bundle (`transduce recipe run`), with every stage of
    /// its lineage as the recipe gave it; absent for bundles made otherwise (older ones
    /// say how in `commands` and `notes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recipe: Option<RecipeOrigin>,
}

/// Where in a recipe a bundle came from: the file, the stage, the scale it ran at, and its
/// lineage, the stages it depends on (other recipes' included) in the order they ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RecipeOrigin {
    /// The recipe file, as the command named it.
    pub file: String,
    /// The stage that wrote the bundle.
    pub stage: String,
    /// `full`, or `smoke` (tiny steps on a few lines: a test, not a model).
    pub scale: String,
    /// The stages the bundle depends on, itself last.
    pub lineage: Vec<RecipeStage>,
}

/// One stage of a recipe, as its file gives it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RecipeStage {
    /// The recipe's name (its file name without `.toml`).
    pub recipe: String,
    pub stage: String,
    pub kind: String,
    /// The stage's fields as written (references to other stages as `@stage`).
    pub settings: serde_json::Value,
}

/// Contents of `config.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleConfig {
    pub format: u32,
    pub task: Task,
    pub model: ModelConfig,
    /// Decoding defaults for this task.
    #[serde(default)]
    pub decoding: DecodeOptions,
    #[serde(default)]
    pub provenance: Provenance,
    /// How `model.safetensors` stores the weights (absent in bundles older than int8
    /// storage, which hold f32 or f16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<WeightDtype>,
    /// Measured scores, e.g. `{"bleu_test2016": 35.1, "bleu_signature": "nrefs:1|..."}`.
    #[serde(default)]
    pub metrics: BTreeMap<String, serde_json::Value>,
    /// sha256 (hex) of the other two files, checked on load.
    #[serde(default)]
    pub sha256: BTreeMap<String, String>,
    /// Noisy-channel reranking with the reverse translator, as chosen on val (absent where
    /// none was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<ChannelConfig>,
    /// Set when these weights are a shipped bundle's fine-tuned on a user's own pairs
    /// (`transduce adapt`, the page's Adapt panel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptation: Option<Adaptation>,
}

/// How a bundle was adapted: fine-tuned from another on a user's sentence pairs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Adaptation {
    /// The user's pairs trained on.
    pub pairs: usize,
    /// General pairs mixed in so the model keeps what it knew.
    pub replay: usize,
    /// Optimizer steps.
    pub steps: usize,
    pub learning_rate: f64,
    pub seed: u64,
    /// sha256 of the weights adapted from (the shipped bundle's `model.safetensors`).
    pub from_sha256: String,
}

/// The reverse translator that reranks this one's beam (noisy-channel reranking, Yee et
/// al. 2019): each finished hypothesis Y of source X is ranked by
/// `log p(Y|X) / lp(|Y|) + weight · log p(X|Y) / lp(|X|)`, lp §6.1's length penalty at the
/// bundle's α, p(X|Y) the reverse model's by teacher forcing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelConfig {
    /// The reverse translator's id (e.g. `de-en` for an `en-de` bundle): the weight was
    /// chosen with that bundle.
    pub model: String,
    /// The channel term's weight, ≥ 0.
    pub weight: f64,
}

impl ChannelConfig {
    /// Checks the weight: a finite number ≥ 0.
    pub fn validate(&self) -> Result<()> {
        if !(self.weight.is_finite() && self.weight >= 0.0) {
            return Err(Error::invalid(
                "channel.weight",
                format!("{} is not a number ≥ 0", self.weight),
            ));
        }
        Ok(())
    }
}

impl BundleConfig {
    /// Parses `config.json`; a syntax or schema error names its line and column.
    pub fn from_json(bytes: &[u8]) -> Result<Self> {
        let config: BundleConfig =
            serde_json::from_slice(bytes).map_err(|e| Error::ConfigSyntax {
                line: e.line(),
                column: e.column(),
                message: e.to_string(),
            })?;
        if config.format != BUNDLE_FORMAT {
            return Err(Error::invalid(
                "format",
                format!(
                    "bundle format {} is not supported (this build reads {BUNDLE_FORMAT})",
                    config.format
                ),
            ));
        }
        config.model.validate()?;
        config.decoding.validate()?;
        if let Some(channel) = &config.channel {
            channel.validate()?;
        }
        Ok(config)
    }

    /// Serializes as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("bundle config serializes")
    }
}

/// Storage precision of `model.safetensors`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WeightDtype {
    F32,
    /// Half precision: half the size; weights are widened back to f32 on load.
    F16,
    /// Matrices in int8 with a per-row f32 scale (a quarter of f32's size, plus the
    /// scales), the rest in f32. On the CPU the host decoder then multiplies in int8.
    Int8,
}
