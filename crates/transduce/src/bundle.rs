//! The model bundle: `config.json` + `tokenizer.json` + `model.safetensors`.
//!
//! Loaded from bytes, so the native CLI and the browser share this one loader. Tensor names
//! follow the module tree (`encoder.layers.0.self_attn.q.weight`); linear weights are stored
//! `[out, in]` and LayerNorm parameters as `weight`/`bias`, the layout other toolkits use.
//!
//! Weights are stored in f32, f16, or int8. In an int8 bundle every linear weight and
//! embedding table `name` `[rows, cols]` is an `I8` tensor with an `F32` tensor
//! `name_scale` `[rows]` beside it: row r is `scale[r]·q[r, ·]` (symmetric, per output row;
//! for the tied embedding, per vocabulary row, which is per output of the pre-softmax
//! projection too). LayerNorm parameters, biases and learned positions stay f32.
//! `config.json`'s `weights` says which ("f32", "f16", "int8").

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::prelude::*;
use burn::tensor::TensorData;
use safetensors::{Dtype, SafeTensors, tensor::TensorView};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::ModelConfig;
use crate::decode::{DecodeOptions, Ensemble};
use crate::error::{Error, Result};
use crate::host::HostModel;
use crate::host::matrix::transpose;
use crate::model::Transformer;
use crate::stored::{Stored, StoredTensors};
use crate::tokenizer::Tokenizer;

/// Version of the bundle layout this crate writes and reads.
pub const BUNDLE_FORMAT: u32 = 1;
/// File names inside a bundle.
pub const CONFIG_FILE: &str = "config.json";
pub const TOKENIZER_FILE: &str = "tokenizer.json";
pub const WEIGHTS_FILE: &str = "model.safetensors";

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

/// A loaded bundle: configuration, tokenizer and model on a device.
pub struct Bundle {
    pub config: BundleConfig,
    pub tokenizer: Tokenizer,
    /// The burn model ([`Bundle::model`]). An int8 bundle read on the CPU decodes from
    /// [`HostModel::from_int8`] alone and builds this only when something asks for it
    /// (training, adaptation, attention maps), from `weights`.
    model: OnceLock<Transformer>,
    /// The int8 weights file the model is built from on first use (as the page or the
    /// CLI handed it over, not copied); `None` when the model came with the bundle.
    weights: Option<Vec<u8>>,
    device: Device,
    /// The model's weights in host memory when it lives on burn's CPU backend: decoding
    /// then runs through [`crate::host`] (see [`Bundle::scorer`]).
    host: Option<HostModel>,
}

/// The three files of a bundle, in memory.
#[derive(Clone, Debug)]
pub struct BundleFiles {
    pub config: Vec<u8>,
    pub tokenizer: Vec<u8>,
    pub weights: Vec<u8>,
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

/// Lowercase hex sha256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Bundle {
    /// Loads a bundle from its three files' bytes onto `device`.
    pub fn from_bytes(files: &BundleFiles, device: &Device) -> Result<Bundle> {
        Bundle::read(files, None, device)
    }

    /// [`Bundle::from_bytes`], keeping the files' weights without a copy where an int8
    /// bundle on the CPU needs them later (to build the burn model on first use).
    pub fn from_files(files: BundleFiles, device: &Device) -> Result<Bundle> {
        let BundleFiles {
            config,
            tokenizer,
            weights,
        } = files;
        let files = BundleFiles {
            config,
            tokenizer,
            weights: Vec::new(),
        };
        Bundle::read(&files, Some(weights), device)
    }

    /// [`Bundle::from_files`] for files this program checked when it stored them (the
    /// page's cache of the models it converted): their sha256 sums are not computed again,
    /// which at OPUS-MT's size is a third of a load in wasm. Everything else is checked.
    pub fn from_files_verified(files: BundleFiles, device: &Device) -> Result<Bundle> {
        let BundleFiles {
            config,
            tokenizer,
            weights,
        } = files;
        let files = BundleFiles {
            config,
            tokenizer,
            weights: Vec::new(),
        };
        Bundle::read_with(&files, Some(weights), device, false)
    }

    /// Reads `files`, their weights being `weights` when given (moved out of `files`).
    fn read(files: &BundleFiles, weights: Option<Vec<u8>>, device: &Device) -> Result<Bundle> {
        Bundle::read_with(files, weights, device, true)
    }

    /// [`Bundle::read`], checking the sha256 sums `config.json` lists when `sums`.
    fn read_with(
        files: &BundleFiles,
        weights: Option<Vec<u8>>,
        device: &Device,
        sums: bool,
    ) -> Result<Bundle> {
        let bytes = weights.as_deref().unwrap_or(&files.weights);
        let (config, tokenizer) = Bundle::checked(files, bytes, sums)?;
        if crate::ops::is_flex(device) && matches!(config.weights, None | Some(WeightDtype::Int8)) {
            let file = SafeTensors::deserialize(bytes)
                .map_err(|e| Error::CorruptWeights(format!("{e:?}")))?;
            described_within(&config.model, &file)?;
            if let Some(host) = HostModel::from_int8(&config.model, &file)? {
                return Ok(Bundle {
                    config,
                    tokenizer,
                    model: OnceLock::new(),
                    weights: Some(weights.unwrap_or_else(|| files.weights.clone())),
                    device: device.clone(),
                    host: Some(host),
                });
            }
        }
        let (model, stored) = Bundle::model_of(&config, bytes, device)?;
        let mut bundle = Bundle::new(config, tokenizer, model)?;
        if stored == WeightDtype::Int8 {
            bundle.quantize();
        }
        Ok(bundle)
    }

    /// A bundle's configuration, tokenizer and model (on `device`, with no host decoder's
    /// copy of the weights: what training starts from), and how the weights were stored.
    /// Checksums, vocabulary and the `weights` field are checked as [`Bundle::from_bytes`]
    /// checks them.
    pub fn parts(
        files: &BundleFiles,
        device: &Device,
    ) -> Result<(BundleConfig, Tokenizer, Transformer, WeightDtype)> {
        let (config, tokenizer) = Bundle::checked(files, &files.weights, true)?;
        let (model, stored) = Bundle::model_of(&config, &files.weights, device)?;
        Ok((config, tokenizer, model, stored))
    }

    /// The configuration and tokenizer of `files` (whose weights are `weights`), the
    /// checksums (when `sums`) and the vocabulary checked.
    fn checked(
        files: &BundleFiles,
        weights: &[u8],
        sums: bool,
    ) -> Result<(BundleConfig, Tokenizer)> {
        let config = BundleConfig::from_json(&files.config)?;
        let listed: &[(&str, &[u8])] = if sums {
            &[
                (TOKENIZER_FILE, &files.tokenizer[..]),
                (WEIGHTS_FILE, weights),
            ]
        } else {
            &[]
        };
        for &(name, bytes) in listed {
            if let Some(expected) = config.sha256.get(name) {
                let found = sha256_hex(bytes);
                if !found.eq_ignore_ascii_case(expected) {
                    return Err(Error::Checksum {
                        file: name.to_string(),
                        expected: expected.clone(),
                        found,
                    });
                }
            }
        }
        let tokenizer = Tokenizer::from_bytes(&files.tokenizer)?;
        if tokenizer.vocab_size() > config.model.vocab_size {
            return Err(Error::invalid(
                "model.vocab_size",
                format!(
                    "{} is smaller than the tokenizer's {} tokens",
                    config.model.vocab_size,
                    tokenizer.vocab_size()
                ),
            ));
        }
        Ok((config, tokenizer))
    }

    /// The model of `config` from the weights file `bytes`, and how they were stored (which
    /// must be what `config.json`'s `weights` says, when it says).
    fn model_of(
        config: &BundleConfig,
        bytes: &[u8],
        device: &Device,
    ) -> Result<(Transformer, WeightDtype)> {
        let (model, stored) = load_weights_stored(&config.model, bytes, device)?;
        if let Some(said) = config.weights
            && said != stored
        {
            return Err(Error::invalid(
                "weights",
                format!(
                    "config.json says the weights are {said:?} but model.safetensors holds \
                     {stored:?}"
                ),
            ));
        }
        Ok((model, stored))
    }

    /// The burn model: built here on first use for an int8 bundle read on the CPU (which
    /// decodes without it).
    pub fn model(&self) -> Result<&Transformer> {
        if let Some(model) = self.model.get() {
            return Ok(model);
        }
        let bytes = self.weights.as_deref().ok_or_else(|| {
            Error::Device("the bundle holds neither a model nor its weights".into())
        })?;
        let (model, _) = Bundle::model_of(&self.config, bytes, &self.device)?;
        // Another thread may have built it meanwhile: the same weights, either one serves.
        let _ = self.model.set(model);
        Ok(self.model.get().expect("set just above"))
    }

    /// Decodes with int8 products on the CPU from now on ([`HostModel::quantize`]): what
    /// an int8 bundle does on load, and what a float bundle can be asked to do (quantized
    /// at load, as CTranslate2's `int8` compute type does). No effect off the CPU.
    pub fn quantize(&mut self) {
        if let Some(host) = &mut self.host {
            host.quantize();
        }
    }

    /// Decodes with f32 products on the CPU from now on (an int8 bundle's weights as
    /// `q·scale`, as GPUs decode them).
    pub fn dequantize(&mut self) {
        if let Some(host) = &mut self.host {
            host.dequantize();
        }
    }

    /// Like [`Bundle::dequantize`], with every weight held in f32: an int8 bundle's
    /// arrays are widened to `q·scale` once (four bytes a weight) and multiplied by the
    /// f32 matrix kernels, several times faster than widening them tile by tile on each
    /// product. For where memory is plentiful (natively); the page keeps the int8 arrays.
    pub fn expand_to_f32(&mut self) {
        if let Some(host) = &mut self.host {
            host.materialize();
        }
    }

    /// A bundle of a model in memory. On burn's CPU backend its weights are also laid out
    /// for the host decoder.
    pub fn new(config: BundleConfig, tokenizer: Tokenizer, model: Transformer) -> Result<Bundle> {
        let device = model.device();
        let host = if crate::ops::is_flex(&device) {
            Some(HostModel::new(&model)?)
        } else {
            None
        };
        Ok(Bundle {
            config,
            tokenizer,
            model: OnceLock::from(model),
            weights: None,
            device,
            host,
        })
    }

    /// The host decoder's copy of the weights, when the model is on the CPU.
    pub fn host(&self) -> Option<&HostModel> {
        self.host.as_ref()
    }

    /// What searches decode with: the host decoder when the model is on the CPU, else the
    /// model on its device.
    pub fn scorer(&self) -> Ensemble<'_> {
        match &self.host {
            Some(host) => host.into(),
            None => match self.model.get() {
                Some(model) => model.into(),
                None => unreachable!("a bundle without its model always has a host decoder"),
            },
        }
    }

    /// Writes the bundle's three files. `config.sha256` is filled in here.
    pub fn to_bytes(&self, dtype: WeightDtype) -> Result<BundleFiles> {
        let model = self.model()?;
        let weights = save_weights(model, dtype)?;
        let tokenizer = self.tokenizer.to_json()?.into_bytes();
        let mut config = self.config.clone();
        config.model = model.config().clone();
        config.weights = Some(dtype);
        config.sha256 = BTreeMap::from([
            (TOKENIZER_FILE.to_string(), sha256_hex(&tokenizer)),
            (WEIGHTS_FILE.to_string(), sha256_hex(&weights)),
        ]);
        Ok(BundleFiles {
            config: config.to_json().into_bytes(),
            tokenizer,
            weights,
        })
    }
}

// Here rather than in `decode`: decoding knows models, not bundles.
impl<'a> Ensemble<'a> {
    /// The models of these bundles: on the host when every one has its weights there
    /// (models on the CPU backend), else on their device.
    pub fn of_bundles(bundles: &'a [Bundle]) -> Result<Self> {
        let hosts: Option<Vec<&HostModel>> = bundles.iter().map(Bundle::host).collect();
        match hosts {
            Some(hosts) => Ensemble::on_host(hosts),
            None => Ensemble::new(bundles.iter().map(Bundle::model).collect::<Result<_>>()?),
        }
    }
}

/// Walks the module tree keeping the dotted path and the enclosing struct.
#[derive(Default)]
struct Path {
    names: Vec<String>,
    containers: Vec<String>,
}

impl Path {
    fn enter(&mut self, name: &str, container: &str) {
        self.names.push(name.to_string());
        self.containers.push(container.to_string());
    }

    fn exit(&mut self) {
        self.names.pop();
        self.containers.pop();
    }

    /// Whether the tensor at this path is stored in int8 in an int8 bundle: linear weights
    /// and the token embeddings.
    fn quantizable(&self) -> bool {
        let (name, linear) = self.stored();
        linear || name == "embedding.weight" || name == "src_embedding.weight"
    }

    /// The stored name, and whether the tensor is a linear weight (stored transposed).
    fn stored(&self) -> (String, bool) {
        let mut names = self.names.clone();
        let container = self.containers.last().map(String::as_str).unwrap_or("");
        let last = names.last_mut();
        let mut linear = false;
        if let Some(last) = last {
            match (container, last.as_str()) {
                ("Struct:LayerNorm", "gamma") => *last = "weight".into(),
                ("Struct:LayerNorm", "beta") => *last = "bias".into(),
                ("Struct:Linear", "weight") => linear = true,
                _ => {}
            }
        }
        (names.join("."), linear)
    }
}

struct Collector {
    path: Path,
    /// Name, stored shape, values, and whether an int8 bundle quantizes it.
    tensors: Vec<(String, Vec<usize>, Vec<f32>, bool)>,
    error: Option<Error>,
}

impl ModuleVisitor for Collector {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.enter(name, container_type);
    }

    fn exit_module(&mut self, _: &str, _: &str) {
        self.path.exit();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let (name, linear) = self.path.stored();
        let quantizable = self.path.quantizable() && D == 2;
        let tensor = param.val();
        let mut shape = tensor.dims().to_vec();
        let values = match tensor.into_data().try_into_vec_as::<f32>() {
            Ok(v) => v,
            Err(e) => {
                self.error = Some(Error::Device(format!("reading {name}: {e:?}")));
                return;
            }
        };
        let values = if linear && D == 2 {
            let (r, c) = (shape[0], shape[1]);
            shape = vec![c, r];
            transpose(&values, r, c)
        } else {
            values
        };
        self.tensors.push((name, shape, values, quantizable));
    }
}

/// Serializes a model's parameters to safetensors bytes (a blocking device read).
pub fn save_weights(model: &Transformer, dtype: WeightDtype) -> Result<Vec<u8>> {
    save_weights_on_scales(model, dtype, None)
}

/// [`save_weights`]; in int8, each row on its scale in `reference` (an int8 weights file of
/// the same architecture: the bundle a model was fine-tuned from) where the row still fits
/// it, so that weights that moved less than half a step come back exactly as they shipped.
/// Rows without a reference scale, or grown past it, get their own.
pub fn save_weights_on_scales(
    model: &Transformer,
    dtype: WeightDtype,
    reference: Option<&[u8]>,
) -> Result<Vec<u8>> {
    let reference = reference
        .map(|bytes| {
            SafeTensors::deserialize(bytes).map_err(|e| Error::CorruptWeights(format!("{e:?}")))
        })
        .transpose()?;
    // The reference's scales of tensor `name` with `rows` rows, when it has them.
    let reference_scales = |name: &str, rows: usize| -> Option<Vec<f32>> {
        let view = reference
            .as_ref()?
            .tensor(&format!("{name}{SCALE_SUFFIX}"))
            .ok()?;
        (view.dtype() == Dtype::F32 && view.shape() == [rows]).then(|| {
            view.data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        })
    };
    let mut collector = Collector {
        path: Path::default(),
        tensors: Vec::new(),
        error: None,
    };
    model.visit(&mut collector);
    if let Some(e) = collector.error {
        return Err(e);
    }
    let mut buffers: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, shape, values, quantizable) in collector.tensors {
        match dtype {
            WeightDtype::Int8 if quantizable => {
                let (q, scales) = match reference_scales(&name, shape[0]) {
                    Some(on) => crate::host::int8::quantize_rows_on(&values, shape[1], &on),
                    None => crate::host::int8::quantize_rows(&values, shape[1]),
                };
                let scale_bytes = scales.iter().flat_map(|v| v.to_le_bytes()).collect();
                buffers.push((
                    format!("{name}{SCALE_SUFFIX}"),
                    Dtype::F32,
                    vec![shape[0]],
                    scale_bytes,
                ));
                buffers.push((name, Dtype::I8, shape, q.iter().map(|&v| v as u8).collect()));
            }
            WeightDtype::F16 => buffers.push((
                name,
                Dtype::F16,
                shape,
                values
                    .iter()
                    .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
                    .collect(),
            )),
            WeightDtype::F32 | WeightDtype::Int8 => buffers.push((
                name,
                Dtype::F32,
                shape,
                values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            )),
        }
    }
    let views = buffers
        .iter()
        .map(|(name, dtype, shape, bytes)| {
            TensorView::new(*dtype, shape.clone(), bytes)
                .map(|view| (name.clone(), view))
                .map_err(|e| Error::CorruptWeights(format!("{name}: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let metadata = HashMap::from([("format".to_string(), "transduce".to_string())]);
    safetensors::serialize(views, Some(metadata)).map_err(|e| Error::CorruptWeights(e.to_string()))
}

pub use crate::stored::SCALE_SUFFIX;

struct Loader<'a> {
    path: Path,
    file: StoredTensors<'a>,
    error: Option<Error>,
    device: Device,
    /// Storage types met, for the bundle's verdict.
    int8: bool,
    f16: bool,
}

impl Loader<'_> {
    fn tensor<const D: usize>(&mut self, expected: [usize; D]) -> Result<Tensor<D>> {
        let (name, linear) = self.path.stored();
        let stored_shape: Vec<usize> = if linear && D == 2 {
            vec![expected[1], expected[0]]
        } else {
            expected.to_vec()
        };
        let quantizable = D == 2 && self.path.quantizable();
        let (values, stored) = self.file.floats(&name, &stored_shape, quantizable)?;
        match stored {
            Stored::Int8 => self.int8 = true,
            Stored::F16 => self.f16 = true,
            Stored::F32 => {}
        }
        let values = if linear && D == 2 {
            transpose(&values, stored_shape[0], stored_shape[1])
        } else {
            values
        };
        Ok(Tensor::from_data(
            TensorData::new(values, expected),
            &self.device,
        ))
    }
}

impl ModuleMapper for Loader<'_> {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.enter(name, container_type);
    }

    fn exit_module(&mut self, _: &str, _: &str) {
        self.path.exit();
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        if self.error.is_some() {
            return param;
        }
        // The shape without initializing: a fresh model's parameters are lazy, and drawing
        // their random initial values only to replace them was a third of a bundle's load.
        let Ok(expected) = <[usize; D]>::try_from(param.lazy_shape().as_slice()) else {
            self.error = Some(Error::Device(format!("parameter of rank ≠ {D}")));
            return param;
        };
        match self.tensor(expected) {
            Ok(tensor) => {
                let id = param.id;
                param.transform_for_load(tensor, id)
            }
            Err(e) => {
                self.error = Some(e);
                param
            }
        }
    }
}

/// Refuses a config that describes far more parameters than the file holds, before any
/// model is allocated: a lying config.json must not exhaust memory (in the browser that
/// kills the module). Smaller mismatches are found tensor by tensor and reported by name;
/// this bounds what they allocate to twice the file, plus 1 M.
fn described_within(config: &ModelConfig, file: &SafeTensors) -> Result<()> {
    let held: usize = file
        .tensors()
        .iter()
        .map(|(_, view)| {
            view.shape()
                .iter()
                .fold(1, |n: usize, &d| n.saturating_mul(d))
        })
        .fold(0, usize::saturating_add);
    let described = config.num_params();
    if described > held.saturating_mul(2).saturating_add(1 << 20) {
        return Err(Error::invalid(
            "model",
            format!(
                "config.json describes {described} parameters, far more than the {held} \
                 model.safetensors holds"
            ),
        ));
    }
    Ok(())
}

/// Builds a model for `config` and fills it from safetensors bytes; every mismatch between
/// config and file is an error naming the tensor. int8 tensors are widened to `q·scale`.
pub fn load_weights(config: &ModelConfig, bytes: &[u8], device: &Device) -> Result<Transformer> {
    load_weights_stored(config, bytes, device).map(|(model, _)| model)
}

/// [`load_weights`], and how the file stored the matrices (int8 if any tensor was, else f16
/// if any was, else f32).
pub fn load_weights_stored(
    config: &ModelConfig,
    bytes: &[u8],
    device: &Device,
) -> Result<(Transformer, WeightDtype)> {
    let file =
        SafeTensors::deserialize(bytes).map_err(|e| Error::CorruptWeights(format!("{e:?}")))?;
    described_within(config, &file)?;
    let model = Transformer::to_load(config, device)?;
    let mut loader = Loader {
        path: Path::default(),
        file: StoredTensors::new(&file),
        error: None,
        device: device.clone(),
        int8: false,
        f16: false,
    };
    let model = model.map(&mut loader);
    if let Some(e) = loader.error {
        return Err(e);
    }
    loader.file.unexpected()?;
    let stored = if loader.int8 {
        WeightDtype::Int8
    } else if loader.f16 {
        WeightDtype::F16
    } else {
        WeightDtype::F32
    };
    Ok((model, stored))
}
