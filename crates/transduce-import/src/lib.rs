//! # transduce-import
//!
//! A Hugging Face Marian (OPUS-MT) model becomes one of our bundles, exactly: the same
//! function of the same weights. Bytes in, bundle files out; nothing here touches a file
//! system or a network, so the native `transduce import` and the browser's worker (wasm32)
//! call the same code and write the same bytes.
//!
//! The model's `config.json` maps onto [`transduce::ModelConfig`] ([`marian`]), its
//! vocabulary is renumbered to our fixed special ids ([`vocab`]), its tensors are renamed
//! and reordered ([`weights`]) from `model.safetensors` or `pytorch_model.bin` (both forms
//! of `torch.save`, [`pytorch`]), its source SentencePiece model becomes a `tokenizers`
//! Unigram model in that id order ([`spm`]), and a model card records the source and its
//! licence ([`card`]). [`hub`] names models as the Hugging Face hub lays them out.
//! Everything is read and checked before anything is returned.

pub mod card;
pub mod error;
pub mod hub;
pub mod marian;
pub mod pytorch;
pub mod spm;
pub mod tensors;
pub mod vocab;
pub mod weights;

#[cfg(test)]
mod testing;

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};
use transduce::bundle::{
    BUNDLE_FORMAT, BundleFiles, Provenance, TOKENIZER_FILE, WEIGHTS_FILE, sha256_hex,
};
use transduce::{BundleConfig, Task, Tokenizer, WeightDtype};

pub use error::{Error, ErrorCode, Result};

/// The files of a Marian model folder the import reads, as the hub serves them.
pub const CONFIG: &str = "config.json";
pub const GENERATION_CONFIG: &str = "generation_config.json";
pub const VOCAB: &str = "vocab.json";
pub const SOURCE_SPM: &str = "source.spm";
pub const README: &str = "README.md";
pub const SAFETENSORS: &str = "model.safetensors";
pub const PYTORCH: &str = "pytorch_model.bin";

/// The files an import needs (the weights aside: [`SAFETENSORS`], else [`PYTORCH`]).
pub const REQUIRED: [&str; 3] = [CONFIG, VOCAB, SOURCE_SPM];
/// Files read when the model has them.
pub const OPTIONAL: [&str; 2] = [GENERATION_CONFIG, README];

/// A model's files by name (`config.json`, …), each file's bytes.
#[derive(Default)]
pub struct ModelFiles {
    files: HashMap<String, Vec<u8>>,
}

impl ModelFiles {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn insert(&mut self, name: impl Into<String>, bytes: Vec<u8>) {
        self.files.insert(name.into(), bytes);
    }

    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.files.get(name).map(Vec::as_slice)
    }

    fn need(&self, name: &str) -> Result<&[u8]> {
        self.get(name).ok_or_else(|| {
            Error::missing(
                name,
                "missing (expected a Hugging Face Marian model's files)",
            )
        })
    }

    /// The weights file present: `model.safetensors`, else `pytorch_model.bin`.
    pub fn weights_file(&self) -> Option<&'static str> {
        [SAFETENSORS, PYTORCH]
            .into_iter()
            .find(|f| self.files.contains_key(*f))
    }
}

/// Which weights file of a listing the import reads: `model.safetensors`, else
/// `pytorch_model.bin`.
pub fn weights_file_of<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<&'static str> {
    let names: Vec<&str> = names.into_iter().collect();
    [SAFETENSORS, PYTORCH]
        .into_iter()
        .find(|f| names.contains(f))
}

/// What an import is asked for beyond the files.
pub struct Options {
    /// How the bundle stores its matrices.
    pub weights: WeightDtype,
    /// The licence when the model card does not name one.
    pub licence: Option<String>,
    /// The source model's name (else the config's `_name_or_path`, else `folder`).
    pub name: Option<String>,
    /// The name of the folder the files came from, the last resort for a name.
    pub folder: Option<String>,
    /// Language codes (else read from an `opus-mt-SRC-TGT` name).
    pub source: Option<String>,
    pub target: Option<String>,
    /// The command that reproduces the bundle, for its provenance.
    pub command: String,
}

/// An imported bundle's files and its model card.
pub struct Imported {
    pub files: BundleFiles,
    pub card: String,
    /// The source model's name.
    pub name: String,
}

impl std::fmt::Debug for Imported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Imported")
            .field("name", &self.name)
            .field("config_bytes", &self.files.config.len())
            .field("tokenizer_bytes", &self.files.tokenizer.len())
            .field("weights_bytes", &self.files.weights.len())
            .finish()
    }
}

fn json_object(file: &str, bytes: &[u8]) -> Result<Map<String, Value>> {
    serde_json::from_slice(bytes).map_err(|e| {
        Error::corrupt(
            file,
            format!(
                "line {} column {}: {e} (expected a JSON object)",
                e.line(),
                e.column()
            ),
        )
    })
}

/// The source model's name: the given one, else a hub id in `_name_or_path`, else the
/// folder's.
fn model_name(config: &Map<String, Value>, options: &Options) -> String {
    if let Some(name) = &options.name {
        return name.clone();
    }
    let hub_id = config
        .get("_name_or_path")
        .and_then(Value::as_str)
        .filter(|s| s.split('/').count() == 2 && !s.starts_with('.') && !s.starts_with('/'));
    match (hub_id, &options.folder) {
        (Some(id), _) => id.to_string(),
        (None, Some(folder)) => folder.clone(),
        (None, None) => "an OPUS-MT model".to_string(),
    }
}

/// Source and target languages from the names Helsinki-NLP publishes under (their last two
/// parts): `opus-mt-SRC-TGT`, `opus-mt-tc-big-SRC-TGT` and `opus-mt-tc-base-…`,
/// `opus-mt-tc-bible-big-SRCS-TGTS` (groups such as `deu_eng_nld`, families such as `gem`),
/// the tiny students' `opus-mt_tiny_SRC-TGT` and `opus-tatoeba-SRC-TGT`. The codes are kept
/// as the name spells them (two letters in the 2020 family, three in the later ones).
pub fn languages(name: &str) -> Option<(String, String)> {
    let base = name.rsplit('/').next()?;
    let base = base.split('@').next()?;
    let rest = ["opus-mt-", "opus-mt_tiny_", "opus-tatoeba-"]
        .iter()
        .find_map(|prefix| base.strip_prefix(prefix))?;
    let mut parts = rest.rsplitn(2, '-');
    let target = parts.next()?;
    let source = parts.next()?.rsplit('-').next()?;
    (!source.is_empty() && !target.is_empty()).then(|| (source.to_string(), target.to_string()))
}

/// Reads a Marian model's files and builds the bundle, or fails with one error naming the
/// file and field. The files are taken by value: the weights file is dropped as soon as the
/// bundle's weights are written, so that an import holds at most the checkpoint, our
/// weights file and one tensor at a time.
pub fn import(mut files: ModelFiles, options: &Options) -> Result<Imported> {
    let config = json_object(CONFIG, files.need(CONFIG)?)?;
    let generation = files
        .get(GENERATION_CONFIG)
        .map(|bytes| json_object(GENERATION_CONFIG, bytes))
        .transpose()?;
    let mut mapped = marian::import_config(&config, generation.as_ref()).map_err(|r| {
        let file = if generation
            .as_ref()
            .is_some_and(|g| g.contains_key(&r.field))
        {
            GENERATION_CONFIG
        } else {
            CONFIG
        };
        Error::unsupported(file, format!("field `{}`: {}", r.field, r.message))
    })?;

    let name = model_name(&config, options);
    let licence = match &options.licence {
        Some(licence) => licence.clone(),
        None => {
            let text = files
                .get(README)
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default();
            card::header(&text).licence.ok_or_else(|| {
                Error::new(
                    ErrorCode::NoLicence,
                    Some(README),
                    "no `license:` in its YAML header; name the weights' licence \
                     (e.g. cc-by-4.0)",
                )
            })?
        }
    };
    // The caller's, else the name's (Helsinki-NLP's families), else the card's two
    // languages (a fine-tuned model published under its author's own name).
    let (source, target) = match (&options.source, &options.target) {
        (Some(s), Some(t)) => (s.clone(), t.clone()),
        _ => languages(&name)
            .or_else(|| {
                let text = files
                    .get(README)
                    .map(|b| String::from_utf8_lossy(b).into_owned());
                card::header(&text.unwrap_or_default()).pair()
            })
            .ok_or_else(|| {
                Error::new(
                    ErrorCode::NoLanguages,
                    None,
                    format!(
                        "cannot tell the languages from the name {name:?} or from README.md's \
                         `language:` (two languages, source first): name the source and \
                         target languages"
                    ),
                )
            })?,
    };

    let vocab = vocab::parse_vocab(files.need(VOCAB)?).map_err(|e| Error::corrupt(VOCAB, e))?;
    if vocab.len() + 1 != mapped.model.vocab_size {
        return Err(Error::unsupported(
            VOCAB,
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
        .ok_or_else(|| Error::unsupported(VOCAB, "no `<unk>` entry"))?;
    let order = vocab::renumber(&vocab, mapped.pad, mapped.eos, unk)
        .map_err(|e| Error::unsupported(VOCAB, e))?;
    drop(vocab);
    // Marian's rows plus our PAD, unless a Marian `<s>` row took its place.
    mapped.model.vocab_size = order.pieces.len();

    let source_spm = spm::SentencePiece::parse(files.need(SOURCE_SPM)?, SOURCE_SPM)?;
    let tokenizer = spm::marian_tokenizer(&source_spm, &order.pieces, transduce::tokenizer::UNK)?;
    let tokenizer_json = tokenizer
        .to_string(false)
        .map_err(|e| Error::unsupported(SOURCE_SPM, format!("cannot write tokenizer.json: {e}")))?;
    drop(tokenizer);
    // Through our loader, so the file is the one every bundle writes.
    let tokenizer = Tokenizer::from_bytes(tokenizer_json.as_bytes())
        .map_err(|e| Error::unsupported(SOURCE_SPM, e.to_string()))?;
    let tokenizer = tokenizer
        .to_json()
        .map_err(|e| Error::unsupported(SOURCE_SPM, e.to_string()))?
        .into_bytes();

    let weights_name = files.weights_file().ok_or_else(|| {
        Error::missing(
            SAFETENSORS,
            "missing, and so is pytorch_model.bin: the model has no weights",
        )
    })?;
    let checkpoint = files.files.remove(weights_name).expect("present");
    drop(files);
    let layout = weights::Layout {
        d_model: mapped.model.d_model,
        d_ff: mapped.model.d_ff,
        layers: (mapped.model.encoder_depth(), mapped.model.decoder_depth()),
        rows: &order.marian,
        tied: mapped.tied,
    };
    let weights = {
        let marian = if weights_name == SAFETENSORS {
            tensors::Tensors::from_safetensors(&checkpoint)
        } else {
            pytorch::read(&checkpoint)
        }
        .map_err(|e| Error::corrupt(weights_name, e))?;
        let plan = weights::Plan::new(&marian, &layout)
            .map_err(|e| Error::unsupported(weights_name, e))?;
        plan.write(options.weights)
            .map_err(|e| Error::corrupt(weights_name, e))?
    };
    drop(checkpoint);

    let mut config = BundleConfig {
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
    config.sha256 = BTreeMap::from([
        (TOKENIZER_FILE.to_string(), sha256_hex(&tokenizer)),
        (WEIGHTS_FILE.to_string(), sha256_hex(&weights)),
    ]);
    let files = BundleFiles {
        config: config.to_json().into_bytes(),
        tokenizer,
        weights,
    };
    let bytes = files.config.len() + files.tokenizer.len() + files.weights.len();
    let card = card::model_card(&config, &name, bytes, &mapped.notes);
    Ok(Imported { files, card, name })
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
        assert_eq!(
            languages("hf:Helsinki-NLP/opus-mt-en-ROMANCE@main"),
            Some(("en".into(), "ROMANCE".into()))
        );
        for (name, pair) in [
            ("Helsinki-NLP/opus-mt_tiny_kor-eng", ("kor", "eng")),
            ("Helsinki-NLP/opus-mt-tc-base-uk-fi", ("uk", "fi")),
            (
                "opus-mt-tc-bible-big-deu_eng_nld-gem",
                ("deu_eng_nld", "gem"),
            ),
            ("Helsinki-NLP/opus-tatoeba-fi-en", ("fi", "en")),
        ] {
            assert_eq!(
                languages(name),
                Some((pair.0.into(), pair.1.into())),
                "{name}"
            );
        }
        assert_eq!(languages("my-model"), None);
    }
}
