//! A Hugging Face Marian `config.json` (and `generation_config.json`) as our
//! [`ModelConfig`] and [`DecodeOptions`], or one error naming the field we cannot represent.
//!
//! Fields absent from the file take `MarianConfig`'s defaults (transformers'
//! `configuration_marian.py`), as transformers itself would.

use serde_json::{Map, Value};
use transduce::config::{Activation, ModelConfig, Positional};
use transduce::decode::{DecodeOptions, LengthNorm};

/// Why a config cannot be imported: the field, and what is wrong with it.
#[derive(Debug, PartialEq)]
pub struct Refusal {
    pub field: String,
    pub message: String,
}

impl Refusal {
    fn new(field: &str, message: impl Into<String>) -> Self {
        Refusal {
            field: field.to_string(),
            message: message.into(),
        }
    }
}

/// What a Marian config says, in our terms.
#[derive(Debug)]
pub struct Imported {
    /// Our model config; `vocab_size` is Marian's plus our PAD row, until the renumbering
    /// ([`super::vocab`]) finds a Marian row to put there.
    pub model: ModelConfig,
    /// Decoding defaults from `generate`'s: beam, α, |Y|^α normalisation.
    pub decoding: DecodeOptions,
    /// Marian's special ids.
    pub pad: u32,
    pub eos: u32,
    /// Whether the output projection is the shared embedding (else `lm_head.weight`).
    pub tied: bool,
    /// What the import leaves out that only training sees (for the model card).
    pub notes: Vec<String>,
}

fn get<'a>(config: &'a Map<String, Value>, field: &str) -> Option<&'a Value> {
    config.get(field).filter(|v| !v.is_null())
}

fn usize_field(config: &Map<String, Value>, field: &str, default: usize) -> Result<usize, Refusal> {
    match get(config, field) {
        None => Ok(default),
        Some(v) => v
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| Refusal::new(field, format!("{v} is not a non-negative integer"))),
    }
}

fn f64_field(config: &Map<String, Value>, field: &str, default: f64) -> Result<f64, Refusal> {
    match get(config, field) {
        None => Ok(default),
        Some(v) => v
            .as_f64()
            .ok_or_else(|| Refusal::new(field, format!("{v} is not a number"))),
    }
}

fn bool_field(config: &Map<String, Value>, field: &str, default: bool) -> Result<bool, Refusal> {
    match get(config, field) {
        None => Ok(default),
        Some(v) => v
            .as_bool()
            .ok_or_else(|| Refusal::new(field, format!("{v} is not true or false"))),
    }
}

/// Two fields that must agree, since our encoder and decoder share one setting.
fn same(
    config: &Map<String, Value>,
    encoder: &str,
    decoder: &str,
    default: usize,
) -> Result<usize, Refusal> {
    let (e, d) = (
        usize_field(config, encoder, default)?,
        usize_field(config, decoder, default)?,
    );
    if e != d {
        return Err(Refusal::new(
            decoder,
            format!("{d} differs from {encoder} {e}: encoder and decoder must have the same shape"),
        ));
    }
    Ok(e)
}

/// Reads `config` (Marian's `config.json`) and `generation` (its `generation_config.json`,
/// when the folder has one; else `generate` reads the same fields from `config.json`).
pub fn import_config(
    config: &Map<String, Value>,
    generation: Option<&Map<String, Value>>,
) -> Result<Imported, Refusal> {
    check_model_type(config)?;
    check_layout(config)?;
    let vocab = vocabulary(config)?;
    let shape = shape(config)?;
    let activation = activation(config)?;
    let (pad, eos) = special_ids(config, vocab)?;
    let tied = bool_field(config, "tie_word_embeddings", true)?;
    let max_len = usize_field(config, "max_position_embeddings", 1024)?;
    let dropout = f64_field(config, "dropout", 0.1)?;
    let attention_dropout = f64_field(config, "attention_dropout", 0.0)?;
    let mut notes = Vec::new();
    let activation_dropout = f64_field(config, "activation_dropout", 0.0)?;
    if activation_dropout > 0.0 {
        notes.push(format!(
            "activation_dropout {activation_dropout} (dropout after the FFN's activation) is \
             not applied when fine-tuning: it affects training only"
        ));
    }
    let Shape {
        d_model,
        n_layers,
        decoder_layers,
        heads,
        d_ff,
    } = shape;
    let model = ModelConfig {
        vocab_size: vocab + 1,
        n_layers,
        decoder_layers: (decoder_layers != n_layers).then_some(decoder_layers),
        d_model,
        d_ff,
        n_heads: heads,
        d_k: d_model / heads,
        d_v: d_model / heads,
        dropout,
        attention_dropout,
        label_smoothing: 0.1,
        positional: Positional::Sinusoid,
        max_len,
        share_embeddings: tied,
        word_focus: false,
        activation,
        attention_bias: true,
        output_bias: true,
        source_eos: true,
    };
    model
        .validate()
        .map_err(|e| Refusal::new("config", e.to_string()))?;
    let decoding = decoding(config, generation, pad, &mut notes)?;
    Ok(Imported {
        model,
        decoding,
        pad,
        eos,
        tied,
        notes,
    })
}

fn check_model_type(config: &Map<String, Value>) -> Result<(), Refusal> {
    match get(config, "model_type").and_then(Value::as_str) {
        Some("marian") => Ok(()),
        Some(other) => Err(Refusal::new(
            "model_type",
            format!("{other:?} is not \"marian\": only Marian (OPUS-MT) models are imported"),
        )),
        None => Err(Refusal::new("model_type", "missing (expected \"marian\")")),
    }
}

/// The paper's layout (§3.1, §3.4), which every OPUS-MT model has: post-norm layers, no
/// norm on the embeddings or after the stacks, embeddings scaled by √d_model, one shared
/// vocabulary. Layouts Marian's code never builds but a config could ask for are refused,
/// not ignored.
fn check_layout(config: &Map<String, Value>) -> Result<(), Refusal> {
    for field in [
        "normalize_before",
        "normalize_embedding",
        "layernorm_embedding",
        "add_final_layer_norm",
    ] {
        if bool_field(config, field, false)? {
            return Err(Refusal::new(
                field,
                "true: only the post-norm layers of the paper (§3.1) are supported, with no norm \
                 on the embeddings or after the stacks",
            ));
        }
    }
    if !bool_field(config, "scale_embedding", false)? {
        return Err(Refusal::new(
            "scale_embedding",
            "false (or absent): our embeddings are always scaled by √d_model (§3.4)",
        ));
    }
    if !bool_field(config, "share_encoder_decoder_embeddings", true)? {
        return Err(Refusal::new(
            "share_encoder_decoder_embeddings",
            "false: separate source and target vocabularies are not supported (one shared \
             vocabulary, §3.4)",
        ));
    }
    Ok(())
}

/// `vocab_size`, which `decoder_vocab_size` (where given) must equal.
fn vocabulary(config: &Map<String, Value>) -> Result<usize, Refusal> {
    let vocab = usize_field(config, "vocab_size", 58_101)?;
    if let Some(decoder_vocab) = get(config, "decoder_vocab_size")
        && decoder_vocab.as_u64() != Some(vocab as u64)
    {
        return Err(Refusal::new(
            "decoder_vocab_size",
            format!(
                "{decoder_vocab} differs from vocab_size {vocab}: one shared vocabulary is supported"
            ),
        ));
    }
    Ok(vocab)
}

/// The stacks' sizes (§3.1–3.3).
struct Shape {
    d_model: usize,
    n_layers: usize,
    decoder_layers: usize,
    heads: usize,
    d_ff: usize,
}

/// The stacks' sizes: depths may differ (Marian's students have 6 encoder layers and 2
/// decoder layers), heads and FFN widths may not (our layers share one setting).
fn shape(config: &Map<String, Value>) -> Result<Shape, Refusal> {
    let d_model = usize_field(config, "d_model", 1024)?;
    let n_layers = usize_field(config, "encoder_layers", 12)?;
    let decoder_layers = usize_field(config, "decoder_layers", 12)?;
    for (field, depth) in [
        ("encoder_layers", n_layers),
        ("decoder_layers", decoder_layers),
    ] {
        if depth == 0 {
            return Err(Refusal::new(field, "0: a stack needs at least one layer"));
        }
    }
    let heads = same(
        config,
        "encoder_attention_heads",
        "decoder_attention_heads",
        16,
    )?;
    let d_ff = same(config, "encoder_ffn_dim", "decoder_ffn_dim", 4096)?;
    if heads == 0 || !d_model.is_multiple_of(heads) {
        return Err(Refusal::new(
            "encoder_attention_heads",
            format!("{heads} does not divide d_model {d_model}"),
        ));
    }
    Ok(Shape {
        d_model,
        n_layers,
        decoder_layers,
        heads,
        d_ff,
    })
}

/// The FFN's activation (§3.3 has ReLU; most OPUS-MT models swish).
fn activation(config: &Map<String, Value>) -> Result<Activation, Refusal> {
    match get(config, "activation_function")
        .map(|v| v.as_str().unwrap_or(""))
        .unwrap_or("gelu")
    {
        "swish" | "silu" => Ok(Activation::Swish),
        "relu" => Ok(Activation::Relu),
        other => Err(Refusal::new(
            "activation_function",
            format!("{other:?} is not supported (relu, swish or silu)"),
        )),
    }
}

/// The padding and end ids, inside the vocabulary; decoders start from padding.
fn special_ids(config: &Map<String, Value>, vocab: usize) -> Result<(u32, u32), Refusal> {
    let pad = usize_field(config, "pad_token_id", 58_100)? as u32;
    let eos = usize_field(config, "eos_token_id", 0)? as u32;
    let start = usize_field(config, "decoder_start_token_id", 58_100)? as u32;
    if start != pad {
        return Err(Refusal::new(
            "decoder_start_token_id",
            format!("{start} differs from pad_token_id {pad}: Marian decoders start from padding"),
        ));
    }
    for (field, id) in [("pad_token_id", pad), ("eos_token_id", eos)] {
        if id as usize >= vocab {
            return Err(Refusal::new(
                field,
                format!("{id} is outside the vocabulary of {vocab}"),
            ));
        }
    }
    Ok((pad, eos))
}

/// `generate`'s defaults as our decoding options: `num_beams` (1 when absent, as
/// transformers), `length_penalty` α (1.0) over |Y|^α. `bad_words_ids` may ban only the
/// padding id (which our decoders never emit).
fn decoding(
    config: &Map<String, Value>,
    generation: Option<&Map<String, Value>>,
    pad: u32,
    notes: &mut Vec<String>,
) -> Result<DecodeOptions, Refusal> {
    let source = generation.unwrap_or(config);
    let beam = usize_field(source, "num_beams", 1)?.clamp(1, DecodeOptions::MAX_BEAM);
    let alpha = f64_field(source, "length_penalty", 1.0)?;
    if let Some(bad) = get(source, "bad_words_ids") {
        let only_pad = bad.as_array().is_some_and(|lists| {
            lists.iter().all(|list| {
                list.as_array()
                    .is_some_and(|ids| ids.len() == 1 && ids[0].as_u64() == Some(pad as u64))
            })
        });
        if !only_pad {
            return Err(Refusal::new(
                "bad_words_ids",
                format!("{bad}: only the padding id may be banned (our decoders never emit it)"),
            ));
        }
    }
    if let Some(max_length) = get(source, "max_length") {
        notes.push(format!(
            "generate's max_length {max_length} (start token included) is replaced by our limit \
             of source length + max_extra tokens"
        ));
    }
    let options = DecodeOptions {
        beam,
        alpha,
        length_norm: LengthNorm::Power,
        ..DecodeOptions::default()
    };
    options
        .validate()
        .map_err(|e| Refusal::new("length_penalty", e.to_string()))?;
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// opus-mt-en-de's config.json, as published (the fields that matter).
    fn opus_mt_en_de() -> Map<String, Value> {
        serde_json::from_str(
            r#"{"model_type": "marian", "activation_function": "swish", "d_model": 512,
                "encoder_layers": 6, "decoder_layers": 6, "encoder_attention_heads": 8,
                "decoder_attention_heads": 8, "encoder_ffn_dim": 2048, "decoder_ffn_dim": 2048,
                "vocab_size": 58101, "pad_token_id": 58100, "decoder_start_token_id": 58100,
                "eos_token_id": 0, "max_position_embeddings": 512, "scale_embedding": true,
                "dropout": 0.1, "attention_dropout": 0.0, "activation_dropout": 0.0,
                "num_beams": 4, "max_length": 512, "bad_words_ids": [[58100]]}"#,
        )
        .unwrap()
    }

    #[test]
    fn opus_mt_shape_maps_field_by_field() {
        let imported = import_config(&opus_mt_en_de(), None).unwrap();
        let m = &imported.model;
        assert_eq!(
            (
                m.vocab_size,
                m.n_layers,
                m.d_model,
                m.d_ff,
                m.n_heads,
                m.d_k
            ),
            (58_102, 6, 512, 2048, 8, 64)
        );
        assert_eq!(m.activation, Activation::Swish);
        assert!(m.attention_bias && m.output_bias && m.source_eos && m.share_embeddings);
        assert_eq!((imported.pad, imported.eos), (58_100, 0));
        assert_eq!(imported.decoding.beam, 4);
        assert_eq!(imported.decoding.alpha, 1.0);
        assert_eq!(imported.decoding.length_norm, LengthNorm::Power);
        // 74M parameters, as the hub reports for opus-mt-en-de (plus our <s> row and the
        // output bias, 58,101 + 1 + 512 values).
        let params = m.num_params();
        assert!((73_000_000..76_000_000).contains(&params), "{params}");
    }

    /// opus-mt_tiny_kor-eng's shape: 6 encoder layers, 2 decoder layers.
    #[test]
    fn a_student_keeps_its_two_depths() {
        let mut config = opus_mt_en_de();
        for (field, value) in [
            ("decoder_layers", 2),
            ("d_model", 256),
            ("encoder_ffn_dim", 1536),
            ("decoder_ffn_dim", 1536),
        ] {
            config.insert(field.into(), value.into());
        }
        let m = import_config(&config, None).unwrap().model;
        assert_eq!((m.encoder_depth(), m.decoder_depth()), (6, 2));
        // Six encoder layers (attention, FFN, two norms) and two decoder layers (two
        // attentions, FFN, three norms), counted by hand at d 256, d_ff 1536, biases on.
        let attention = 4 * 256 * 256 + 4 * 256;
        let ffn = 2 * 256 * 1536 + 1536 + 256;
        let encoder = attention + ffn + 2 * 2 * 256;
        let decoder = 2 * attention + ffn + 3 * 2 * 256;
        let tables = 58_102 * 256 + 58_102;
        assert_eq!(m.num_params(), 6 * encoder + 2 * decoder + tables);
    }

    #[test]
    fn what_we_cannot_represent_is_refused_by_field() {
        let cases: &[(&str, Value, &str)] = &[
            (
                "share_encoder_decoder_embeddings",
                Value::Bool(false),
                "share_encoder_decoder_embeddings",
            ),
            ("decoder_layers", Value::from(0), "decoder_layers"),
            ("decoder_ffn_dim", Value::from(1024), "decoder_ffn_dim"),
            ("normalize_before", Value::Bool(true), "normalize_before"),
            (
                "layernorm_embedding",
                Value::Bool(true),
                "layernorm_embedding",
            ),
            (
                "activation_function",
                Value::from("gelu"),
                "activation_function",
            ),
            ("scale_embedding", Value::Bool(false), "scale_embedding"),
            (
                "decoder_start_token_id",
                Value::from(0),
                "decoder_start_token_id",
            ),
            ("model_type", Value::from("bart"), "model_type"),
            (
                "decoder_vocab_size",
                Value::from(1000),
                "decoder_vocab_size",
            ),
            ("bad_words_ids", serde_json::json!([[5]]), "bad_words_ids"),
        ];
        for (field, value, named) in cases {
            let mut config = opus_mt_en_de();
            config.insert(field.to_string(), value.clone());
            let refusal = import_config(&config, None).unwrap_err();
            assert_eq!(&refusal.field, named, "{field}: {refusal:?}");
        }
    }

    #[test]
    fn generation_config_takes_precedence() {
        let generation: Map<String, Value> =
            serde_json::from_str(r#"{"num_beams": 6, "length_penalty": 0.8}"#).unwrap();
        let imported = import_config(&opus_mt_en_de(), Some(&generation)).unwrap();
        assert_eq!((imported.decoding.beam, imported.decoding.alpha), (6, 0.8));
    }
}
