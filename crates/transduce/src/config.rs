//! Model hyper-parameters (§3, Table 3) as a serde struct, with the paper's presets.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// How positions enter the model (§3.5, Table 3 row E).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Positional {
    /// Fixed sinusoids, PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(..).
    Sinusoid,
    /// Learned positional embeddings, one table for the encoder and one for the decoder.
    Learned,
}

/// The position-wise FFN's non-linearity (§3.3 uses ReLU).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    /// max(0, x), the paper's.
    #[default]
    Relu,
    /// x·σ(x) (SiLU), as most OPUS-MT (Marian) models use.
    Swish,
}

impl Activation {
    /// The non-linearity applied to one value (the GPU decoder's definition; burn's
    /// `relu`/`silu` compute the same; the host decoder's swish is `host::rows::swish`,
    /// vectorized, within a few ulps of it).
    #[inline(always)]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Activation::Relu => x.max(0.0),
            Activation::Swish => x / (1.0 + (-x).exp()),
        }
    }

    fn is_relu(&self) -> bool {
        *self == Activation::Relu
    }
}

/// Hyper-parameters of the encoder–decoder Transformer.
///
/// Field names follow the paper: `n_layers` is N, `n_heads` is h; `d_k` and `d_v` are free
/// settings (Table 3 rows A and B) rather than forced to `d_model / h`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Size of the shared (source+target) vocabulary.
    pub vocab_size: usize,
    /// N: identical layers in the encoder, and in the decoder unless `decoder_layers`
    /// says otherwise.
    pub n_layers: usize,
    /// The decoder's N where it differs from the encoder's: Marian's distilled students
    /// (6 encoder layers, 2 decoder layers, the shape Firefox Translations ships) spend
    /// their depth where it is paid once per sentence, not once per output token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decoder_layers: Option<usize>,
    /// d_model: width of every sub-layer output and embedding.
    pub d_model: usize,
    /// d_ff: inner width of the position-wise feed-forward network (§3.3).
    pub d_ff: usize,
    /// h: attention heads (§3.2.2).
    pub n_heads: usize,
    /// d_k: width of each head's queries and keys.
    pub d_k: usize,
    /// d_v: width of each head's values.
    pub d_v: usize,
    /// P_drop: residual and embedding dropout (§5.4).
    pub dropout: f64,
    /// Dropout on attention weights. The paper does not use it (0.0); tensor2tensor's
    /// parsing setting does.
    #[serde(default)]
    pub attention_dropout: f64,
    /// ε_ls: label smoothing used in training (§5.4).
    pub label_smoothing: f64,
    /// Sinusoidal or learned positions.
    pub positional: Positional,
    /// Longest sequence the model accepts (learned positions have this many rows).
    pub max_len: usize,
    /// One matrix for source embedding, target embedding and pre-softmax projection (§3.4).
    /// When false the three are separate.
    pub share_embeddings: bool,
    /// Word focus (parsing, beyond the paper): each decoder input also receives the encoder
    /// state of the word the next slot will fill, so the decoder need not find its place in
    /// the sentence by attention alone. See [`crate::task::focus`]. Off in every preset.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub word_focus: bool,
    /// The FFN's non-linearity: ReLU (§3.3) unless a model was imported with another.
    #[serde(default, skip_serializing_if = "Activation::is_relu")]
    pub activation: Activation,
    /// Biases on the attention projections W^Q, W^K, W^V and W^O. The paper's are plain
    /// matrices (§3.2.2); Marian's have biases.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub attention_bias: bool,
    /// A learned bias added to the output logits (Marian's `final_logits_bias`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub output_bias: bool,
    /// Sources end with EOS, as Marian's tokenizer appends `</s>` to every source. Callers
    /// pass sources without it; each decoder and the trainer append it
    /// ([`ModelConfig::source_row`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub source_eos: bool,
}

/// One row of the paper's Table 3, with the parameter count it reports (millions).
#[derive(Clone, Debug)]
pub struct Table3Row {
    pub name: &'static str,
    pub config: ModelConfig,
    /// The paper's "params ×10^6" column; rows that leave it blank repeat the base model.
    pub paper_params_millions: f64,
}

/// Vocabulary size used for the parameter counts of Table 3 (§5.1: about 37,000 tokens).
pub const TABLE3_VOCAB: usize = 37_000;

impl ModelConfig {
    /// The encoder's N (§3.1).
    pub fn encoder_depth(&self) -> usize {
        self.n_layers
    }

    /// The decoder's N (§3.1): the encoder's unless `decoder_layers` is set.
    pub fn decoder_depth(&self) -> usize {
        self.decoder_layers.unwrap_or(self.n_layers)
    }

    /// The paper's choices for the fields beyond its hyper-parameters (ReLU, no attention or
    /// output biases, sources without EOS); the presets start from these. Its sizes are
    /// placeholders that every preset overrides.
    fn paper_variant() -> Self {
        ModelConfig {
            vocab_size: 0,
            n_layers: 0,
            decoder_layers: None,
            d_model: 0,
            d_ff: 0,
            n_heads: 0,
            d_k: 0,
            d_v: 0,
            dropout: 0.0,
            attention_dropout: 0.0,
            label_smoothing: 0.0,
            positional: Positional::Sinusoid,
            max_len: 0,
            share_embeddings: true,
            word_focus: false,
            activation: Activation::Relu,
            attention_bias: false,
            output_bias: false,
            source_eos: false,
        }
    }

    /// A source row as the encoder reads it: `ids` (without BOS or EOS), then EOS for models
    /// whose sources end with it ([`ModelConfig::source_eos`]).
    pub fn source_row(&self, ids: &[u32]) -> Vec<u32> {
        let mut row = Vec::with_capacity(ids.len() + 1);
        row.extend_from_slice(ids);
        if self.source_eos {
            row.push(crate::tokenizer::EOS);
        }
        row
    }

    /// [`ModelConfig::source_row`] for a batch of sources: borrowed as they are unless the
    /// model's sources end with EOS.
    pub fn source_rows<'a>(&self, sources: &'a [Vec<u32>]) -> Cow<'a, [Vec<u32>]> {
        if self.source_eos {
            Cow::Owned(sources.iter().map(|ids| self.source_row(ids)).collect())
        } else {
            Cow::Borrowed(sources)
        }
    }

    /// The base model of Table 3: N=6, d_model=512, d_ff=2048, h=8, d_k=d_v=64, P_drop=0.1.
    pub fn base() -> Self {
        ModelConfig {
            vocab_size: TABLE3_VOCAB,
            n_layers: 6,
            d_model: 512,
            d_ff: 2048,
            n_heads: 8,
            d_k: 64,
            d_v: 64,
            dropout: 0.1,
            attention_dropout: 0.0,
            label_smoothing: 0.1,
            positional: Positional::Sinusoid,
            max_len: 1024,
            share_embeddings: true,
            word_focus: false,
            ..Self::paper_variant()
        }
    }

    /// The big model of Table 3: d_model=1024, d_ff=4096, h=16, P_drop=0.3.
    pub fn big() -> Self {
        ModelConfig {
            d_model: 1024,
            d_ff: 4096,
            n_heads: 16,
            dropout: 0.3,
            ..Self::base()
        }
    }

    /// The WSJ-only parsing model of §6.3: 4 layers, d_model=1024.
    ///
    /// The paper gives only those two numbers. The rest follows tensor2tensor's
    /// `transformer_parsing_base` hyper-parameters, which start from `transformer_base` and
    /// change hidden size to 1024, attention and residual dropout to 0.2 and untie the
    /// embeddings; d_ff stays 2048 and h stays 8, so d_k = d_v = 1024 / 8 = 128.
    pub fn parsing() -> Self {
        ModelConfig {
            vocab_size: 16_000,
            n_layers: 4,
            d_model: 1024,
            d_ff: 2048,
            n_heads: 8,
            d_k: 128,
            d_v: 128,
            dropout: 0.2,
            attention_dropout: 0.2,
            label_smoothing: 0.1,
            positional: Positional::Sinusoid,
            max_len: 1024,
            share_embeddings: false,
            word_focus: false,
            ..Self::paper_variant()
        }
    }

    /// A tiny model for tests and synthetic tasks: trains in seconds on a 2-core CPU.
    pub fn tiny() -> Self {
        ModelConfig {
            vocab_size: 64,
            n_layers: 2,
            d_model: 64,
            d_ff: 256,
            n_heads: 4,
            d_k: 16,
            d_v: 16,
            dropout: 0.0,
            attention_dropout: 0.0,
            label_smoothing: 0.0,
            positional: Positional::Sinusoid,
            max_len: 256,
            share_embeddings: true,
            word_focus: false,
            ..Self::paper_variant()
        }
    }

    /// A small translation model for CPU training (Multi30k-sized data, 8k vocabulary).
    pub fn small() -> Self {
        ModelConfig {
            vocab_size: 8_000,
            n_layers: 3,
            d_model: 256,
            d_ff: 1024,
            n_heads: 4,
            d_k: 64,
            d_v: 64,
            dropout: 0.1,
            attention_dropout: 0.0,
            label_smoothing: 0.1,
            positional: Positional::Sinusoid,
            max_len: 512,
            share_embeddings: true,
            word_focus: false,
            ..Self::paper_variant()
        }
    }

    /// Between `tiny` and `small`: quick CPU experiments.
    pub fn mini() -> Self {
        ModelConfig {
            n_layers: 2,
            d_model: 128,
            d_ff: 512,
            n_heads: 4,
            d_k: 32,
            d_v: 32,
            ..Self::small()
        }
    }

    /// Between `mini` and `small`: the first demo translators' size. 4.6M parameters with an 8k
    /// vocabulary, so a bundle stored in f16 (9.3 MB of weights) stays under the page's
    /// 10 MB budget without int8 storage, and it trains at about 60% of `small`'s cost per
    /// token. Three layers, as `small`, since depth (Table 3, rows C) pays more than width.
    pub fn compact() -> Self {
        ModelConfig {
            d_model: 192,
            d_ff: 768,
            d_k: 48,
            d_v: 48,
            ..Self::small()
        }
    }

    /// A distilled student in the shape Firefox Translations ships and OPUS-MT's
    /// `opus-mt_tiny_*` models have: 6 encoder layers but 2 decoder layers (the decoder runs
    /// once per output token, the encoder once per sentence), d_model 256, d_ff 1536, 8
    /// heads.
    pub fn student() -> Self {
        ModelConfig {
            n_layers: 6,
            decoder_layers: Some(2),
            d_model: 256,
            d_ff: 1536,
            n_heads: 8,
            d_k: 32,
            d_v: 32,
            ..Self::small()
        }
    }

    /// Looks a preset up by name: `base`, `big`, `parsing`, `tiny`, `mini`, `compact`,
    /// `small`, `student`, or a Table 3 row such as `A1`, `B2`, `C7`, `D3`, `E`.
    pub fn preset(name: &str) -> Result<Self> {
        match name {
            "base" => Ok(Self::base()),
            "big" => Ok(Self::big()),
            "parsing" => Ok(Self::parsing()),
            "tiny" => Ok(Self::tiny()),
            "mini" => Ok(Self::mini()),
            "compact" => Ok(Self::compact()),
            "small" => Ok(Self::small()),
            "student" => Ok(Self::student()),
            other => table3()
                .into_iter()
                .find(|row| row.name.eq_ignore_ascii_case(other))
                .map(|row| row.config)
                .ok_or_else(|| {
                    Error::invalid(
                        "preset",
                        format!(
                            "unknown preset `{other}` (known: {})",
                            preset_names().join(", ")
                        ),
                    )
                }),
        }
    }

    /// The same model with another vocabulary size.
    pub fn with_vocab(mut self, vocab_size: usize) -> Self {
        self.vocab_size = vocab_size;
        self
    }

    /// Fails when a sequence is longer than the model can place (learned positions).
    pub fn check_length(&self, len: usize) -> Result<()> {
        if self.positional == Positional::Learned && len > self.max_len {
            return Err(Error::Input(format!(
                "sequence of {len} tokens is longer than max_len {} of this model",
                self.max_len
            )));
        }
        Ok(())
    }

    /// Checks every field; the error names the field.
    pub fn validate(&self) -> Result<()> {
        let positive = [
            ("vocab_size", self.vocab_size),
            ("n_layers", self.n_layers),
            ("decoder_layers", self.decoder_depth()),
            ("d_model", self.d_model),
            ("d_ff", self.d_ff),
            ("n_heads", self.n_heads),
            ("d_k", self.d_k),
            ("d_v", self.d_v),
            ("max_len", self.max_len),
        ];
        for (field, value) in positive {
            if value == 0 {
                return Err(Error::invalid(field, "must be at least 1"));
            }
        }
        if self.param_count().is_none() {
            return Err(Error::invalid(
                "d_model",
                "the sizes give more parameters than this machine can count",
            ));
        }
        if self.vocab_size < crate::tokenizer::SPECIAL_TOKENS.len() {
            return Err(Error::invalid(
                "vocab_size",
                "must hold at least the 4 special tokens",
            ));
        }
        if self.positional == Positional::Sinusoid && !self.d_model.is_multiple_of(2) {
            return Err(Error::invalid(
                "d_model",
                "must be even for sinusoidal positions",
            ));
        }
        for (field, p) in [
            ("dropout", self.dropout),
            ("attention_dropout", self.attention_dropout),
        ] {
            if !(0.0..1.0).contains(&p) {
                return Err(Error::invalid(field, format!("{p} is not in [0, 1)")));
            }
        }
        if !(0.0..1.0).contains(&self.label_smoothing) {
            return Err(Error::invalid(
                "label_smoothing",
                format!("{} is not in [0, 1)", self.label_smoothing),
            ));
        }
        Ok(())
    }

    /// Number of trainable parameters, computed from the formulae of §3 (not by building the
    /// model): attention projections have no biases (the paper's W^Q, W^K, W^V, W^O are plain
    /// matrices), the FFN has biases b1, b2, every LayerNorm has a gain and a bias.
    pub fn num_params(&self) -> usize {
        self.param_count().unwrap_or(usize::MAX)
    }

    /// [`ModelConfig::num_params`], or `None` when a config's sizes overflow the count
    /// ([`ModelConfig::validate`] rejects those).
    fn param_count(&self) -> Option<usize> {
        let d = self.d_model;
        let h = self.n_heads;
        let (add, mul) = (usize::checked_add, usize::checked_mul);
        let qk = mul(mul(d, h)?, mul(self.d_k, 2)?)?;
        let v = mul(mul(d, h)?, self.d_v)?;
        let o = mul(mul(h, self.d_v)?, d)?;
        let attention = add(add(qk, v)?, o)?;
        let attention = if self.attention_bias {
            // b^Q, b^K (h·d_k each), b^V (h·d_v), b^O (d_model).
            add(
                attention,
                add(add(mul(mul(h, self.d_k)?, 2)?, mul(h, self.d_v)?)?, d)?,
            )?
        } else {
            attention
        };
        let fc = mul(d, self.d_ff)?;
        let ffn = add(add(mul(fc, 2)?, self.d_ff)?, d)?;
        let norm = mul(2, d)?;
        let encoder_layer = add(add(attention, ffn)?, mul(2, norm)?)?;
        let decoder_layer = add(add(mul(2, attention)?, ffn)?, mul(3, norm)?)?;
        let tables = if self.share_embeddings { 1 } else { 3 };
        let embeddings = mul(mul(tables, self.vocab_size)?, d)?;
        let positions = match self.positional {
            Positional::Sinusoid => 0,
            Positional::Learned => mul(mul(2, self.max_len)?, d)?,
        };
        let layers = add(
            mul(self.n_layers, encoder_layer)?,
            mul(self.decoder_depth(), decoder_layer)?,
        )?;
        let output_bias = if self.output_bias { self.vocab_size } else { 0 };
        add(add(add(layers, embeddings)?, positions)?, output_bias)
    }
}

/// Every preset name [`ModelConfig::preset`] accepts.
pub fn preset_names() -> Vec<String> {
    let mut names: Vec<String> = [
        "base", "big", "parsing", "tiny", "mini", "compact", "small", "student",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    names.extend(table3().into_iter().map(|row| row.name.to_string()));
    names
}

/// The rows of Table 3 ("Variations on the Transformer architecture"), vocabulary 37,000.
///
/// Rows A1–A4 vary h with d_k = d_v = d_model / h; B1–B2 shrink d_k; C1–C7 vary N, d_model
/// and d_ff; D1–D4 vary dropout and label smoothing; E uses learned positions. Rows whose
/// params column is blank in the paper repeat the base count (65M).
pub fn table3() -> Vec<Table3Row> {
    let base = ModelConfig::base();
    let row = |name: &'static str, paper: f64, config: ModelConfig| Table3Row {
        name,
        config,
        paper_params_millions: paper,
    };
    let heads = |h: usize, dk: usize| ModelConfig {
        n_heads: h,
        d_k: dk,
        d_v: dk,
        ..base.clone()
    };
    vec![
        row("base", 65.0, base.clone()),
        row("A1", 65.0, heads(1, 512)),
        row("A2", 65.0, heads(4, 128)),
        row("A3", 65.0, heads(16, 32)),
        row("A4", 65.0, heads(32, 16)),
        row(
            "B1",
            58.0,
            ModelConfig {
                d_k: 16,
                ..base.clone()
            },
        ),
        row(
            "B2",
            60.0,
            ModelConfig {
                d_k: 32,
                ..base.clone()
            },
        ),
        row(
            "C1",
            36.0,
            ModelConfig {
                n_layers: 2,
                ..base.clone()
            },
        ),
        row(
            "C2",
            50.0,
            ModelConfig {
                n_layers: 4,
                ..base.clone()
            },
        ),
        row(
            "C3",
            80.0,
            ModelConfig {
                n_layers: 8,
                ..base.clone()
            },
        ),
        row(
            "C4",
            28.0,
            ModelConfig {
                d_model: 256,
                d_k: 32,
                d_v: 32,
                ..base.clone()
            },
        ),
        row(
            "C5",
            168.0,
            ModelConfig {
                d_model: 1024,
                d_k: 128,
                d_v: 128,
                ..base.clone()
            },
        ),
        row(
            "C6",
            53.0,
            ModelConfig {
                d_ff: 1024,
                ..base.clone()
            },
        ),
        row(
            "C7",
            90.0,
            ModelConfig {
                d_ff: 4096,
                ..base.clone()
            },
        ),
        row(
            "D1",
            65.0,
            ModelConfig {
                dropout: 0.0,
                ..base.clone()
            },
        ),
        row(
            "D2",
            65.0,
            ModelConfig {
                dropout: 0.2,
                ..base.clone()
            },
        ),
        row(
            "D3",
            65.0,
            ModelConfig {
                label_smoothing: 0.0,
                ..base.clone()
            },
        ),
        row(
            "D4",
            65.0,
            ModelConfig {
                label_smoothing: 0.2,
                ..base.clone()
            },
        ),
        row(
            "E",
            65.0,
            ModelConfig {
                positional: Positional::Learned,
                ..base.clone()
            },
        ),
        row("big", 213.0, ModelConfig::big()),
    ]
}

/// Table 3 as text: each row's settings, the computed parameter count and the paper's.
///
/// The paper's column is not consistent with any single vocabulary size (base implies
/// about 41k tokens, big about 36k), so the difference is shown, not hidden.
pub fn table3_report() -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{:<5} {:>2} {:>6} {:>5} {:>3} {:>4} {:>4} {:>5} {:>5} {:<8} {:>10} {:>8} {:>7}\n",
        "row",
        "N",
        "d_model",
        "d_ff",
        "h",
        "d_k",
        "d_v",
        "P_drop",
        "e_ls",
        "pos",
        "computed",
        "paper",
        "diff"
    ));
    for row in table3() {
        let c = &row.config;
        let computed = c.num_params() as f64 / 1e6;
        let pos = match c.positional {
            Positional::Sinusoid => "sinusoid",
            Positional::Learned => "learned",
        };
        out.push_str(&format!(
            "{:<5} {:>2} {:>6} {:>5} {:>3} {:>4} {:>4} {:>5.1} {:>5.1} {:<8} {:>9.1}M {:>7.0}M {:>+6.1}M\n",
            row.name,
            c.n_layers,
            c.d_model,
            c.d_ff,
            c.n_heads,
            c.d_k,
            c.d_v,
            c.dropout,
            c.label_smoothing,
            pos,
            computed,
            row.paper_params_millions,
            computed - row.paper_params_millions
        ));
    }
    out.push_str(&format!(
        "computed with a shared vocabulary of {TABLE3_VOCAB} tokens (§5.1), tied embeddings (§3.4), no attention biases\n"
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Configs written before `decoder_layers` existed load with equal depths, and configs
    /// of equal depths are written as before, so old bundles and new ones agree byte for byte.
    #[test]
    fn equal_depths_need_no_decoder_layers_field() {
        let small = ModelConfig::small();
        let json = serde_json::to_string(&small).unwrap();
        assert!(!json.contains("decoder_layers"), "{json}");
        let back: ModelConfig = serde_json::from_str(&json).unwrap();
        assert_eq!((back.encoder_depth(), back.decoder_depth()), (3, 3));
        let student = ModelConfig::student();
        let json = serde_json::to_string(&student).unwrap();
        assert!(json.contains("\"decoder_layers\":2"), "{json}");
        let back: ModelConfig = serde_json::from_str(&json).unwrap();
        assert_eq!((back.encoder_depth(), back.decoder_depth()), (6, 2));
        let none = ModelConfig {
            decoder_layers: Some(0),
            ..student
        };
        assert!(
            none.validate()
                .unwrap_err()
                .to_string()
                .contains("decoder_layers")
        );
    }

    #[test]
    fn presets_validate_and_round_trip_through_json() {
        for name in preset_names() {
            let config = ModelConfig::preset(&name).unwrap();
            config.validate().unwrap();
            let json = serde_json::to_string(&config).unwrap();
            let back: ModelConfig = serde_json::from_str(&json).unwrap();
            assert_eq!(back, config, "{name}");
        }
    }

    #[test]
    fn base_count_by_hand() {
        // Hand count for the base model with V = 37,000:
        // embeddings 37,000·512 = 18,944,000
        // encoder layer: attention 4·512·512 = 1,048,576; FFN 2·512·2048 + 2048 + 512 =
        //   2,099,712; two LayerNorms 2·1,024 → 3,150,336; ×6 = 18,902,016
        // decoder layer: 2·1,048,576 + 2,099,712 + 3·1,024 = 4,199,936; ×6 = 25,199,616
        assert_eq!(
            ModelConfig::base().num_params(),
            18_944_000 + 18_902_016 + 25_199_616
        );
    }

    #[test]
    fn compact_fits_the_demo_budget_in_f16() {
        // Hand count, V = 8,000, d = 192, d_ff = 768, h·d_k = 192, N = 3:
        // embeddings 8,000·192 = 1,536,000
        // encoder layer: attention 4·192·192 = 147,456; FFN 2·192·768 + 768 + 192 = 295,872;
        //   two LayerNorms 768 → 444,096
        // decoder layer: 2·147,456 + 295,872 + 1,152 = 591,936; both ×3 = 3,108,096
        let params = ModelConfig::compact().num_params();
        assert_eq!(params, 1_536_000 + 3_108_096);
        // Two bytes a weight, plus a ~0.6 MB tokenizer.json, under 10 MB.
        assert!(2 * params + 600_000 < 10_000_000);
    }

    #[test]
    fn table3_rows_are_within_the_papers_rounding_of_the_vocab_ambiguity() {
        // Each computed count is within 10% of the paper's: the paper's own column is not
        // consistent with one vocabulary size, so exact agreement is impossible.
        for row in table3() {
            let computed = row.config.num_params() as f64 / 1e6;
            let rel = (computed - row.paper_params_millions).abs() / row.paper_params_millions;
            assert!(
                rel < 0.10,
                "{}: {computed} vs {}",
                row.name,
                row.paper_params_millions
            );
        }
        assert!(table3_report().contains("C5"));
    }

    #[test]
    fn bad_fields_are_named() {
        let mut c = ModelConfig::tiny();
        c.n_heads = 0;
        assert!(c.validate().unwrap_err().to_string().contains("n_heads"));
        let mut c = ModelConfig::tiny();
        c.dropout = 1.5;
        assert!(c.validate().unwrap_err().to_string().contains("dropout"));
        assert!(ModelConfig::preset("nope").is_err());
    }
}
