//! Decoding (§6.1): the encoder runs once, the decoder steps one token at a time over a
//! per-layer key/value cache. Greedy search and beam search with the GNMT length penalty.
//!
//! Models on burn's CPU backend decode through [`crate::host`]; on other devices every
//! read goes through [`read`], which is async: in the browser a synchronous read panics.
//! Top-k selection runs on the host after that read (WebGPU's `topk` falls back to a
//! synchronous path). Native callers use the blocking wrappers.

mod beam;
mod constraints;
mod ensemble;
mod forced;
mod greedy;
mod outputs;
mod scores;

pub use beam::{BeamSearch, RowView, beam_search, beam_search_async, by_score, search_mask};
pub use constraints::{Constraint, Unconstrained};
pub use ensemble::Ensemble;
pub use forced::{forced_log_probs, forced_log_probs_async};
pub use greedy::{extend as greedy_extend, greedy, greedy_async};
pub use outputs::{best_of_each, best_outputs, best_outputs_async, hypotheses, hypotheses_async};

use burn::prelude::*;

use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::tokenizer::{EOS, PAD};

/// Search settings; the defaults are §6.1's: beam 4, α = 0.6, max length input + 50.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DecodeOptions {
    /// Beam size k; 1 is greedy.
    pub beam: usize,
    /// Length-penalty exponent α of lp(Y) = ((5 + |Y|) / 6)^α.
    pub alpha: f64,
    /// Output may be at most input length + `max_extra` tokens (EOS included).
    pub max_extra: usize,
    /// What α's exponent applies to: GNMT's (5 + |Y|) / 6 (§6.1), or |Y| itself, as
    /// Hugging Face's `generate` ranks the beams of imported Marian models.
    #[serde(skip_serializing_if = "LengthNorm::is_gnmt")]
    pub length_norm: LengthNorm,
}

/// The length normalisation of beam scores: log p(Y) / lp(|Y|), |Y| counting EOS.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LengthNorm {
    /// lp = ((5 + |Y|) / 6)^α (Wu et al. 2016, §6.1).
    #[default]
    Gnmt,
    /// lp = |Y|^α (Hugging Face `generate`'s `length_penalty`).
    Power,
}

impl LengthNorm {
    fn is_gnmt(&self) -> bool {
        *self == LengthNorm::Gnmt
    }
}

/// A length penalty: the normalisation and its exponent α.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Penalty {
    pub norm: LengthNorm,
    pub alpha: f64,
}

impl Penalty {
    /// lp(|Y|) for an output of `len` tokens, EOS included.
    pub fn of(self, len: usize) -> f64 {
        match self.norm {
            LengthNorm::Gnmt => length_penalty(len, self.alpha),
            LengthNorm::Power => (len as f64).powf(self.alpha),
        }
    }
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            beam: 4,
            alpha: 0.6,
            max_extra: 50,
            length_norm: LengthNorm::Gnmt,
        }
    }
}

impl DecodeOptions {
    /// Largest beam a bundle may ask for: the paper uses 4 (§6.1) and 21 (§6.3); far larger
    /// beams only cost memory (each keeps a score per vocabulary entry).
    pub const MAX_BEAM: usize = 1024;

    /// The length penalty these options rank beams with.
    pub fn penalty(&self) -> Penalty {
        Penalty {
            norm: self.length_norm,
            alpha: self.alpha,
        }
    }

    /// Checks the ranges: beam 1 ..= [`DecodeOptions::MAX_BEAM`], α a number ≥ 0.
    pub fn validate(&self) -> Result<()> {
        if self.beam == 0 || self.beam > Self::MAX_BEAM {
            return Err(Error::invalid(
                "decoding.beam",
                format!("{} is not in 1..={}", self.beam, Self::MAX_BEAM),
            ));
        }
        if !(self.alpha.is_finite() && self.alpha >= 0.0) {
            return Err(Error::invalid(
                "decoding.alpha",
                format!("{} is not a number ≥ 0", self.alpha),
            ));
        }
        Ok(())
    }
}

/// One decoded output (empty, log-probability 0, before the first step).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hypothesis {
    /// Output ids, without BOS and EOS.
    pub tokens: Vec<u32>,
    /// Sum of token log-probabilities, EOS included.
    pub log_prob: f64,
    /// `log_prob / lp(|Y|)`, |Y| counting EOS: what beam search ranks by.
    pub score: f64,
}

/// GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^α (Wu et al. 2016, used in §6.1).
pub fn length_penalty(len: usize, alpha: f64) -> f64 {
    ((5.0 + len as f64) / 6.0).powf(alpha)
}

/// Reads a float tensor to the host without blocking.
pub async fn read(tensor: Tensor<2>) -> Result<Vec<f32>> {
    let data = tensor
        .into_data_async()
        .await
        .map_err(|e| Error::Device(format!("{e:?}")))?;
    data.try_into_vec_as::<f32>()
        .map_err(|e| Error::Device(format!("{e:?}")))
}

/// Reads an int tensor to the host without blocking.
pub async fn read_int(tensor: Tensor<2, Int>) -> Result<Vec<i64>> {
    let data = tensor
        .into_data_async()
        .await
        .map_err(|e| Error::Device(format!("{e:?}")))?;
    data.try_into_vec_as::<i64>()
        .map_err(|e| Error::Device(format!("{e:?}")))
}

/// Longest output (EOS included) for a source of `src_len` tokens.
pub fn max_output_len(config: &ModelConfig, src_len: usize, options: &DecodeOptions) -> usize {
    let limit = src_len + options.max_extra.max(1);
    match config.positional {
        // Learned positions have max_len rows; position 0 is BOS.
        crate::config::Positional::Learned => limit.min(config.max_len),
        crate::config::Positional::Sinusoid => limit,
    }
}

/// Checks a batch of sources before decoding: non-empty, ids in range, no PAD inside.
pub fn check_sources(config: &ModelConfig, sources: &[Vec<u32>]) -> Result<()> {
    let vocab = config.vocab_size as u32;
    for (i, src) in sources.iter().enumerate() {
        // A model whose sources end with EOS reads an empty source as EOS alone.
        if src.is_empty() && !config.source_eos {
            return Err(Error::Input(format!("source {i} is empty")));
        }
        if let Some(bad) = src.iter().find(|&&id| id >= vocab) {
            return Err(Error::Input(format!(
                "source {i} has token id {bad}, outside the vocabulary of {vocab}"
            )));
        }
        if src.contains(&PAD) {
            return Err(Error::Input(format!("source {i} contains the padding id")));
        }
        config.check_length(config.source_row(src).len())?;
    }
    Ok(())
}

/// Host-side mask of one row: the constraint, and EOS alone when the length limit is hit.
fn allowed_tokens(
    constraint: Option<&dyn Constraint>,
    sentence: usize,
    prefix: &[u32],
    vocab: usize,
    last_position: bool,
) -> Option<Vec<bool>> {
    if last_position {
        let mut allowed = vec![false; vocab];
        allowed[EOS as usize] = true;
        return Some(allowed);
    }
    constraint.filter(|c| c.restricts()).map(|c| {
        let mut allowed = vec![true; vocab];
        c.restrict(sentence, prefix, &mut allowed);
        allowed
    })
}

/// Word-focus models need a constraint that gives each decoder input its word.
pub fn check_focus(config: &ModelConfig, constraint: Option<&dyn Constraint>) -> Result<()> {
    if config.word_focus && !constraint.is_some_and(|c| c.has_focus()) {
        return Err(Error::Input(
            "this model aligns its decoder to the input words (word_focus): decode it \
             through the parse task"
                .into(),
        ));
    }
    Ok(())
}

/// Each row's word focus (source position, -1 for none), when the constraint gives one.
/// Row r is sentence `rows[r].0` with output prefix `rows[r].1`.
pub fn focus_rows<'a>(
    constraint: Option<&dyn Constraint>,
    rows: impl Iterator<Item = (usize, &'a [u32])>,
) -> Option<Vec<i32>> {
    let constraint = constraint.filter(|c| c.has_focus())?;
    Some(
        rows.map(|(s, prefix)| constraint.focus(s, prefix).map_or(-1, |p| p as i32))
            .collect(),
    )
}

/// Int tensor of row indices.
fn rows_tensor(rows: &[usize], device: &Device) -> Tensor<1, Int> {
    let data: Vec<i32> = rows.iter().map(|&r| r as i32).collect();
    Tensor::<1, Int>::from_data(burn::tensor::TensorData::new(data, [rows.len()]), device)
}

/// Int tensor of one token per row.
fn tokens_tensor(tokens: &[u32], device: &Device) -> Tensor<1, Int> {
    let data: Vec<i32> = tokens.iter().map(|&t| t as i32).collect();
    Tensor::<1, Int>::from_data(burn::tensor::TensorData::new(data, [tokens.len()]), device)
}
