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

use std::collections::BTreeMap;
use std::sync::OnceLock;

use burn::prelude::*;
use safetensors::SafeTensors;
use sha2::{Digest, Sha256};

use crate::decode::Ensemble;
use crate::error::{Error, Result};
use crate::host::HostModel;
use crate::model::Transformer;
use crate::tokenizer::Tokenizer;

mod manifest;
mod weights;

pub use manifest::{
    Adaptation, BUNDLE_FORMAT, BundleConfig, ChannelConfig, Provenance, RecipeOrigin, RecipeStage,
    Task, WeightDtype,
};
use weights::described_within;
pub use weights::{
    SCALE_SUFFIX, load_weights, load_weights_stored, save_weights, save_weights_on_scales,
};

/// File names inside a bundle.
pub const CONFIG_FILE: &str = "config.json";
pub const TOKENIZER_FILE: &str = "tokenizer.json";
pub const WEIGHTS_FILE: &str = "model.safetensors";

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
            Error::Device(if self.host.is_some() {
                "the bundle's weights file was let go after loading (Bundle::release_weights): \
                 it decodes on the host only"
                    .into()
            } else {
                "the bundle holds neither a model nor its weights".into()
            })
        })?;
        let (model, _) = Bundle::model_of(&self.config, bytes, &self.device)?;
        // Another thread may have built it meanwhile: the same weights, either one serves.
        let _ = self.model.set(model);
        Ok(self.model.get().expect("set just above"))
    }

    /// Lets go of the weights file that an int8 bundle read into the host decoder keeps for
    /// building the burn model on first use: the file's whole size (75 MB at
    /// opus-mt-en-de's), held beside the host decoder's own copy. For a program that only
    /// decodes on the host, as `transduce translate` on the CPU does. [`Bundle::model`]
    /// fails afterwards, saying why, unless it was built before. No effect on a bundle
    /// without a host decoder (its model is already built).
    pub fn release_weights(&mut self) {
        if self.host.is_some() {
            self.weights = None;
        }
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
