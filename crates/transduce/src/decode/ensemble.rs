//! Ensembles (beyond the paper; fairseq and Marian decode them the same way): several
//! models over one vocabulary searched as one. Each next token is scored by the mean of
//! the members' log-probabilities, Marian's log-linear combination with equal weights.
//! Every member keeps its own encoder output and key/value caches; the search sees one
//! scorer. An ensemble of one model is that model: its scores are not touched.

use burn::prelude::*;
use burn::tensor::activation::log_softmax;

use super::{
    Constraint, DecodeOptions, ban_specials, check_focus, check_sources, focus_tensor,
    max_output_len, tokens_tensor,
};
use crate::error::{Error, Result};
use crate::model::{DecoderState, Transformer, token_tensor};

/// Models decoded together. Build one with [`Ensemble::new`]; a single `&Transformer`
/// converts into an ensemble of one, so every search takes either.
#[derive(Clone, Debug)]
pub struct Ensemble<'a> {
    models: Vec<&'a Transformer>,
}

impl<'a> Ensemble<'a> {
    /// Checks that the members can be combined: at least one, all with the same
    /// vocabulary size and on the same device. That their vocabularies hold the same
    /// tokens in the same order is the caller's to check (it has the tokenizers).
    pub fn new(models: Vec<&'a Transformer>) -> Result<Self> {
        let first = models
            .first()
            .ok_or_else(|| Error::Input("an ensemble needs at least one model".into()))?;
        for (i, m) in models.iter().enumerate().skip(1) {
            if m.config().vocab_size != first.config().vocab_size {
                return Err(Error::Input(format!(
                    "ensemble member {} has a vocabulary of {} tokens, member 1 of {}: \
                     members must share one vocabulary",
                    i + 1,
                    m.config().vocab_size,
                    first.config().vocab_size
                )));
            }
            if m.device() != first.device() {
                return Err(Error::Input(format!(
                    "ensemble member {} is on {:?}, member 1 on {:?}",
                    i + 1,
                    m.device(),
                    first.device()
                )));
            }
        }
        Ok(Ensemble { models })
    }

    /// The members, in the order given.
    pub fn models(&self) -> &[&'a Transformer] {
        &self.models
    }

    pub(crate) fn vocab_size(&self) -> usize {
        self.models[0].config().vocab_size
    }

    pub(crate) fn device(&self) -> Device {
        self.models[0].device()
    }

    /// Sources and constraint suit every member.
    pub(crate) fn check(
        &self,
        sources: &[Vec<u32>],
        constraint: Option<&dyn Constraint>,
    ) -> Result<()> {
        for m in &self.models {
            check_sources(m, sources)?;
            check_focus(m, constraint)?;
        }
        Ok(())
    }

    /// Longest output (EOS included) every member can produce for this source.
    pub fn max_output_len(&self, src_len: usize, options: &DecodeOptions) -> usize {
        self.models
            .iter()
            .map(|m| max_output_len(m, src_len, options))
            .min()
            .unwrap_or(0)
    }

    /// Encodes the batch with every member and opens their caches.
    pub(crate) fn start(&self, sources: &[Vec<u32>]) -> Result<Caches> {
        let tokens = token_tensor(sources, &self.device())?;
        Ok(Caches(
            self.models
                .iter()
                .map(|m| m.start_decoding(&m.encode(tokens.clone())))
                .collect(),
        ))
    }

    /// Feeds `last` (one token per row) to every member and returns the combined
    /// next-token log-probabilities `[rows, vocab]`. Row r is sentence `rows[r].0` with
    /// output prefix `rows[r].1` (for word-focus members).
    pub(crate) fn step(
        &self,
        caches: &mut Caches,
        last: &[u32],
        constraint: Option<&dyn Constraint>,
        rows: &[(usize, &[u32])],
    ) -> Tensor<2> {
        let device = self.device();
        let tokens = tokens_tensor(last, &device);
        // Word focus depends on the prefixes only: the same for every member that uses it.
        let mut focus: Option<Option<Tensor<1, Int>>> = None;
        let mut sum: Option<Tensor<2>> = None;
        for (m, state) in self.models.iter().zip(&mut caches.0) {
            let focus = if m.config().word_focus {
                focus
                    .get_or_insert_with(|| {
                        focus_tensor(m, constraint, rows.iter().copied(), &device)
                    })
                    .clone()
            } else {
                None
            };
            let log_probs = log_softmax(m.decode_step_focused(state, tokens.clone(), focus), 1);
            sum = Some(match sum {
                None => log_probs,
                Some(s) => s + log_probs,
            });
        }
        let sum = sum.expect("an ensemble has at least one member");
        ban_specials(match self.models.len() {
            1 => sum,
            n => sum.div_scalar(n as f32),
        })
    }
}

impl<'a> From<&'a Transformer> for Ensemble<'a> {
    fn from(model: &'a Transformer) -> Self {
        Ensemble {
            models: vec![model],
        }
    }
}

impl<'a> From<&Ensemble<'a>> for Ensemble<'a> {
    fn from(ensemble: &Ensemble<'a>) -> Self {
        ensemble.clone()
    }
}

/// Every member's decoder caches, rows in the same order.
pub(crate) struct Caches(Vec<DecoderState>);

impl Caches {
    /// Keeps (or repeats) rows of every member's caches.
    pub(crate) fn select(self, rows: Tensor<1, Int>) -> Caches {
        Caches(self.0.iter().map(|s| s.select(rows.clone())).collect())
    }
}
