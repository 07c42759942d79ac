//! `transduce import`: a Hugging Face Marian (OPUS-MT) folder becomes one of our bundles.
//!
//! The folder's `config.json` maps onto [`transduce::ModelConfig`] ([`marian`]), its
//! vocabulary is renumbered to our fixed special ids ([`vocab`]), its tensors are renamed and
//! reordered ([`weights`]), its source SentencePiece model becomes a `tokenizers` Unigram
//! model in that id order ([`spm`]), and a model card records the source and its licence
//! ([`card`]). Everything is read and checked before anything is written.

pub mod card;
pub mod marian;
pub mod spm;
pub mod vocab;
pub mod weights;

#[cfg(test)]
mod fixtures;

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use transduce::bundle::{BUNDLE_FORMAT, BundleFiles, Provenance, load_weights};
use transduce::{Bundle, BundleConfig, Task, Tokenizer, WeightDtype};

use crate::error::{CliError, Result, io};

/// What `transduce import` was asked for beyond the folder.
pub struct ImportOptions {
    /// How the bundle stores its matrices.
    pub weights: WeightDtype,
    /// The licence when the folder's README does not name one.
    pub licence: Option<String>,
    /// The source model's name (else the config's `_name_or_path`, else the folder's name).
    pub name: Option<String>,
    /// Language codes (else read from an `opus-mt-SRC-TGT` name).
    pub source: Option<String>,
    pub target: Option<String>,
    /// The command line, for the provenance.
    pub command: String,
}

/// An imported bundle's files and its model card, not yet written.
pub struct Imported {
    pub files: BundleFiles,
    pub card: String,
    /// The source model's name.
    pub name: String,
}

fn format_error(path: &Path, message: impl Into<String>) -> CliError {
    CliError::Format {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

fn read(dir: &Path, name: &str) -> Result<(PathBuf, Vec<u8>)> {
    let path = dir.join(name);
    let bytes = std::fs::read(&path).map_err(io(&path))?;
    Ok((path, bytes))
}

fn json_object(path: &Path, bytes: &[u8]) -> Result<Map<String, Value>> {
    serde_json::from_slice(bytes).map_err(|e| {
        format_error(
            path,
            format!(
                "line {} column {}: {e} (expected a JSON object)",
                e.line(),
                e.column()
            ),
        )
    })
}

/// The source model's name: `--name`, else a hub id in `_name_or_path`, else the folder's.
fn model_name(dir: &Path, config: &Map<String, Value>, given: Option<&str>) -> String {
    if let Some(name) = given {
        return name.to_string();
    }
    let hub_id = config
        .get("_name_or_path")
        .and_then(Value::as_str)
        .filter(|s| s.split('/').count() == 2 && !s.starts_with('.') && !s.starts_with('/'));
    match hub_id {
        Some(id) => id.to_string(),
        None => dir
            .canonicalize()
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| dir.display().to_string()),
    }
}

/// Source and target languages from `opus-mt-SRC-TGT` (its last two parts).
fn languages(name: &str) -> Option<(String, String)> {
    let base = name.rsplit('/').next()?;
    let rest = base.strip_prefix("opus-mt-")?;
    let mut parts = rest.rsplitn(2, '-');
    let target = parts.next()?;
    let source = parts.next()?.rsplit('-').next()?;
    (!source.is_empty() && !target.is_empty()).then(|| (source.to_string(), target.to_string()))
}

/// Reads a Marian folder and builds the bundle, or fails with one error naming the file and
/// field; nothing is written here.
pub fn import(dir: &Path, options: &ImportOptions) -> Result<Imported> {
    if !dir.is_dir() {
        return Err(format_error(
            dir,
            "not a folder (expected a Hugging Face Marian model folder)",
        ));
    }
    let (config_path, config_bytes) = read(dir, "config.json")?;
    let config = json_object(&config_path, &config_bytes)?;
    let generation_path = dir.join("generation_config.json");
    let generation = if generation_path.exists() {
        let bytes = std::fs::read(&generation_path).map_err(io(&generation_path))?;
        Some(json_object(&generation_path, &bytes)?)
    } else {
        None
    };
    let mapped = marian::import_config(&config, generation.as_ref()).map_err(|r| {
        let path = if generation
            .as_ref()
            .is_some_and(|g| g.contains_key(&r.field))
        {
            &generation_path
        } else {
            &config_path
        };
        format_error(path, format!("field `{}`: {}", r.field, r.message))
    })?;

    let name = model_name(dir, &config, options.name.as_deref());
    let licence = match (&options.licence, dir.join("README.md")) {
        (Some(licence), _) => licence.clone(),
        (None, readme) => {
            let text = std::fs::read_to_string(&readme).unwrap_or_default();
            card::header(&text).licence.ok_or_else(|| {
                CliError::Usage(format!(
                    "{}: no `license:` in its YAML header; name the weights' licence with \
                     --licence (e.g. --licence cc-by-4.0)",
                    readme.display()
                ))
            })?
        }
    };
    let (source, target) = match (&options.source, &options.target) {
        (Some(s), Some(t)) => (s.clone(), t.clone()),
        _ => languages(&name).ok_or_else(|| {
            CliError::Usage(format!(
                "cannot tell the languages from the name {name:?}: pass --source and --target"
            ))
        })?,
    };

    let (vocab_path, vocab_bytes) = read(dir, "vocab.json")?;
    let vocab = vocab::parse_vocab(&vocab_bytes).map_err(|e| format_error(&vocab_path, e))?;
    if vocab.len() + 1 != mapped.model.vocab_size {
        return Err(format_error(
            &vocab_path,
            format!(
                "{} entries, but config.json's vocab_size is {}",
                vocab.len(),
                mapped.model.vocab_size - 1
            ),
        ));
    }
    let unk = vocab
        .iter()
        .find(|(piece, _)| piece == "<unk>")
        .map(|(_, id)| *id)
        .ok_or_else(|| format_error(&vocab_path, "no `<unk>` entry"))?;
    let order = vocab::renumber(&vocab, mapped.pad, mapped.eos, unk)
        .map_err(|e| format_error(&vocab_path, e))?;

    let spm_path = dir.join("source.spm");
    let source_spm = spm::SentencePiece::read(&spm_path)?;
    let tokenizer = spm::marian_tokenizer(&source_spm, &order.pieces, transduce::tokenizer::UNK)?;
    let tokenizer_json = tokenizer
        .to_string(false)
        .map_err(|e| format_error(&spm_path, format!("cannot write tokenizer.json: {e}")))?;
    let tokenizer = Tokenizer::from_bytes(tokenizer_json.as_bytes())?;

    let marian_tensors = read_tensors(dir)?;
    let layout = weights::Layout {
        d_model: mapped.model.d_model,
        d_ff: mapped.model.d_ff,
        n_layers: mapped.model.n_layers,
        rows: &order.marian,
        tied: mapped.tied,
    };
    let ours = weights::to_ours(&marian_tensors.1, &layout)
        .map_err(|e| format_error(&marian_tensors.0, e))?;
    drop(marian_tensors);
    let device = transduce::burn::prelude::Device::flex();
    let model = load_weights(&mapped.model, &ours, &device)?;
    drop(ours);

    let config = BundleConfig {
        format: BUNDLE_FORMAT,
        task: Task::Translate { source, target },
        model: mapped.model.clone(),
        decoding: mapped.decoding.clone(),
        provenance: Provenance {
            created_by: format!("transduce {} import", env!("CARGO_PKG_VERSION")),
            commands: vec![options.command.clone()],
            imported_from: name.clone(),
            licence,
            notes: mapped.notes.join("; "),
            ..Provenance::default()
        },
        weights: Some(options.weights),
        metrics: Default::default(),
        sha256: Default::default(),
        channel: None,
        adaptation: None,
    };
    let bundle = Bundle::new(config, tokenizer, model)?;
    let files = bundle.to_bytes(options.weights)?;
    let bytes = files.config.len() + files.tokenizer.len() + files.weights.len();
    let card = card::model_card(&bundle.config, &name, bytes, &mapped.notes);
    Ok(Imported { files, card, name })
}

/// The folder's weights: `model.safetensors`, else `pytorch_model.bin`.
fn read_tensors(dir: &Path) -> Result<(PathBuf, weights::Tensors)> {
    let safetensors = dir.join("model.safetensors");
    if safetensors.exists() {
        let bytes = std::fs::read(&safetensors).map_err(io(&safetensors))?;
        let tensors = weights::Tensors::from_safetensors(&bytes)
            .map_err(|e| format_error(&safetensors, e))?;
        return Ok((safetensors, tensors));
    }
    let bin = dir.join("pytorch_model.bin");
    if bin.exists() {
        let tensors = weights::Tensors::from_pytorch(&bin).map_err(|e| format_error(&bin, e))?;
        return Ok((bin, tensors));
    }
    Err(format_error(
        dir,
        "neither model.safetensors nor pytorch_model.bin is here",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_come_from_opus_mt_names() {
        assert_eq!(
            languages("Helsinki-NLP/opus-mt-en-de"),
            Some(("en".into(), "de".into()))
        );
        assert_eq!(
            languages("opus-mt-tc-big-en-fr"),
            Some(("en".into(), "fr".into()))
        );
        assert_eq!(languages("my-model"), None);
    }
}
