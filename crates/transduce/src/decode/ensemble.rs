//! Ensembles (beyond the paper; fairseq and Marian decode them the same way): several
//! models over one vocabulary searched as one. Each next token is scored by the mean of
//! the members' log-probabilities, Marian's log-linear combination with equal weights.
//! Every member keeps its own encoder output and key/value caches; the search sees one
//! scorer. An ensemble of one model is that model: its scores are not touched.
//!
//! Members are burn modules decoded on their device, or [`HostModel`]s decoded on the CPU
//! (the fast path for models on burn's CPU backend); one ensemble holds one kind.

use burn::prelude::*;
use burn::tensor::activation::log_softmax;

use super::scores::HostScores;
use super::{
    Constraint, DecodeOptions, check_focus, check_sources, focus_rows, max_output_len, read,
    read_int, rows_tensor, tokens_tensor,
};
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::host::{HostModel, HostState};
use crate::model::{DecoderState, Transformer, token_tensor};
use crate::tokenizer::{BOS, PAD};

#[derive(Clone, Debug)]
enum Members<'a> {
    Device(Vec<&'a Transformer>),
    Host(Vec<&'a HostModel>),
}

/// Models decoded together. Build one with [`Ensemble::new`] or [`Ensemble::on_host`]; a
/// single `&Transformer` or `&HostModel` converts into an ensemble of one, so every search
/// takes either.
#[derive(Clone, Debug)]
pub struct Ensemble<'a> {
    members: Members<'a>,
}

/// Members must share one vocabulary size.
fn check_vocabularies(configs: &[&ModelConfig]) -> Result<()> {
    let first = configs
        .first()
        .ok_or_else(|| Error::Input("an ensemble needs at least one model".into()))?;
    for (i, c) in configs.iter().enumerate().skip(1) {
        if c.vocab_size != first.vocab_size {
            return Err(Error::Input(format!(
                "ensemble member {} has a vocabulary of {} tokens, member 1 of {}: \
                 members must share one vocabulary",
                i + 1,
                c.vocab_size,
                first.vocab_size
            )));
        }
    }
    Ok(())
}

impl<'a> Ensemble<'a> {
    /// Checks that the members can be combined: at least one, all with the same
    /// vocabulary size and on the same device. That their vocabularies hold the same
    /// tokens in the same order is the caller's to check (it has the tokenizers).
    pub fn new(models: Vec<&'a Transformer>) -> Result<Self> {
        check_vocabularies(&models.iter().map(|m| m.config()).collect::<Vec<_>>())?;
        let first = models[0];
        for (i, m) in models.iter().enumerate().skip(1) {
            if m.device() != first.device() {
                return Err(Error::Input(format!(
                    "ensemble member {} is on {:?}, member 1 on {:?}",
                    i + 1,
                    m.device(),
                    first.device()
                )));
            }
        }
        Ok(Ensemble {
            members: Members::Device(models),
        })
    }

    /// An ensemble decoded on the host CPU.
    pub fn on_host(models: Vec<&'a HostModel>) -> Result<Self> {
        check_vocabularies(&models.iter().map(|m| m.config()).collect::<Vec<_>>())?;
        Ok(Ensemble {
            members: Members::Host(models),
        })
    }

    /// The members' configurations, in the order given.
    pub fn configs(&self) -> Vec<&ModelConfig> {
        match &self.members {
            Members::Device(models) => models.iter().map(|m| m.config()).collect(),
            Members::Host(models) => models.iter().map(|m| m.config()).collect(),
        }
    }

    pub(crate) fn vocab_size(&self) -> usize {
        self.configs()[0].vocab_size
    }

    /// Sources and constraint suit every member.
    pub(crate) fn check(
        &self,
        sources: &[Vec<u32>],
        constraint: Option<&dyn Constraint>,
    ) -> Result<()> {
        for config in self.configs() {
            check_sources(config, sources)?;
            check_focus(config, constraint)?;
        }
        Ok(())
    }

    /// Longest output (EOS included) every member can produce for this source.
    pub fn max_output_len(&self, src_len: usize, options: &DecodeOptions) -> usize {
        self.configs()
            .iter()
            .map(|c| max_output_len(c, src_len, options))
            .min()
            .unwrap_or(0)
    }

    /// Encodes the batch with every member and opens their caches.
    pub(crate) fn start(&self, sources: &[Vec<u32>]) -> Result<Caches> {
        match &self.members {
            Members::Device(models) => {
                let mut caches = Vec::with_capacity(models.len());
                for m in models {
                    let rows = m.config().source_rows(sources);
                    let tokens = token_tensor(&rows, &m.device())?;
                    caches.push(m.start_decoding(&m.encode(tokens)));
                }
                Ok(Caches::Device(caches))
            }
            Members::Host(models) => Ok(Caches::Host(
                models
                    .iter()
                    .map(|m| m.start(sources))
                    .collect::<Result<_>>()?,
            )),
        }
    }

    /// Feeds `last` (one token per row) to every member and returns the combined
    /// next-token log-probabilities `[rows, vocab]`, PAD and BOS never allowed. Row r is
    /// sentence `rows[r].0` with output prefix `rows[r].1` (for word-focus members).
    pub(crate) fn step(
        &self,
        caches: &mut Caches,
        last: &[u32],
        constraint: Option<&dyn Constraint>,
        rows: &[(usize, &[u32])],
    ) -> Result<Scores> {
        // Word focus depends on the prefixes only: the same for every member that uses it.
        let focus = self
            .configs()
            .iter()
            .any(|c| c.word_focus)
            .then(|| focus_rows(constraint, rows.iter().copied()))
            .flatten();
        let vocab = self.vocab_size();
        match (&self.members, caches) {
            (Members::Device(models), Caches::Device(states)) => {
                let device = models[0].device();
                let tokens = tokens_tensor(last, &device);
                let focus = focus.map(|f| {
                    let n = f.len();
                    Tensor::<1, Int>::from_data(burn::tensor::TensorData::new(f, [n]), &device)
                });
                let mut sum: Option<Tensor<2>> = None;
                for (m, state) in models.iter().zip(states) {
                    let focus = focus.clone().filter(|_| m.config().word_focus);
                    let log_probs =
                        log_softmax(m.decode_step_focused(state, tokens.clone(), focus), 1);
                    sum = Some(match sum {
                        None => log_probs,
                        Some(s) => s + log_probs,
                    });
                }
                let sum = sum.expect("an ensemble has at least one member");
                let mean = match models.len() {
                    1 => sum,
                    n => sum.div_scalar(n as f32),
                };
                let mut banned = vec![0.0f32; vocab];
                banned[PAD as usize] = f32::NEG_INFINITY;
                banned[BOS as usize] = f32::NEG_INFINITY;
                let banned =
                    Tensor::<1>::from_floats(banned.as_slice(), &device).reshape([1, vocab]);
                Ok(Scores::Device(Box::new(mean + banned)))
            }
            (Members::Host(models), Caches::Host(states)) => {
                if let ([m], [state]) = (models.as_slice(), states.as_mut_slice()) {
                    // One model: its logits and shifts, normalized where they are read.
                    let focus = focus.as_deref().filter(|_| m.config().word_focus);
                    let mut values = state.take_spare();
                    m.step_raw(state, last, focus, &mut values)?;
                    return Ok(Scores::Host(HostScores::logits(values, vocab)));
                }
                let mut sum = states[0].take_spare();
                let mut one = Vec::new();
                for (i, (m, state)) in models.iter().zip(states).enumerate() {
                    let focus = focus.as_deref().filter(|_| m.config().word_focus);
                    if i == 0 {
                        m.step(state, last, focus, &mut sum)?;
                    } else {
                        m.step(state, last, focus, &mut one)?;
                        for (s, v) in sum.iter_mut().zip(&one) {
                            *s += v;
                        }
                    }
                }
                let n = models.len() as f32;
                for s in sum.iter_mut() {
                    *s /= n;
                }
                ban_specials(&mut sum, vocab);
                Ok(Scores::Host(HostScores::normalized(sum, vocab)))
            }
            _ => Err(Error::Input(
                "decoder caches of another ensemble were passed".into(),
            )),
        }
    }
}

/// PAD and BOS are never predicted: −∞ in every row (after normalization, so they still
/// count in it, as on the device).
fn ban_specials(values: &mut [f32], vocab: usize) {
    for row in values.chunks_exact_mut(vocab) {
        row[PAD as usize] = f32::NEG_INFINITY;
        row[BOS as usize] = f32::NEG_INFINITY;
    }
}

impl<'a> From<&'a Transformer> for Ensemble<'a> {
    fn from(model: &'a Transformer) -> Self {
        Ensemble {
            members: Members::Device(vec![model]),
        }
    }
}

impl<'a> From<&'a HostModel> for Ensemble<'a> {
    fn from(model: &'a HostModel) -> Self {
        Ensemble {
            members: Members::Host(vec![model]),
        }
    }
}

impl<'a> From<&Ensemble<'a>> for Ensemble<'a> {
    fn from(ensemble: &Ensemble<'a>) -> Self {
        ensemble.clone()
    }
}

/// Every member's decoder caches, rows in the same order.
pub(crate) enum Caches {
    Device(Vec<DecoderState>),
    Host(Vec<HostState>),
}

impl Caches {
    /// Takes back a step's scores so the next step reuses their memory.
    pub(crate) fn recycle(&mut self, scores: Scores) {
        if let (Caches::Host(states), Scores::Host(scores)) = (self, scores)
            && let Some(first) = states.first_mut()
        {
            first.recycle(scores.into_values());
        }
    }

    /// No row will be fed more than `positions` tokens: host caches grow to that at most.
    pub(crate) fn limit_positions(&mut self, positions: usize) {
        if let Caches::Host(states) = self {
            for state in states {
                state.limit_positions(positions);
            }
        }
    }

    /// Keeps (or repeats) rows of every member's caches: row i becomes row `parents[i]`.
    pub(crate) fn select(&mut self, parents: &[usize]) {
        match self {
            Caches::Device(states) => {
                let Some(first) = states.first() else { return };
                let rows = rows_tensor(parents, &first.blocked.device());
                for state in states.iter_mut() {
                    *state = state.select(rows.clone());
                }
            }
            Caches::Host(states) => {
                for state in states.iter_mut() {
                    state.select(parents);
                }
            }
        }
    }
}

/// One step's next-token log-probabilities `[rows, vocab]`, on the device or the host.
pub(crate) enum Scores {
    Device(Box<Tensor<2>>),
    Host(HostScores),
}

impl Scores {
    /// On the host, rows as values and shifts.
    pub(crate) async fn into_host(self) -> Result<HostScores> {
        match self {
            Scores::Device(t) => {
                let vocab = t.dims()[1];
                Ok(HostScores::normalized(read(*t).await?, vocab))
            }
            Scores::Host(scores) => Ok(scores),
        }
    }

    /// Each row's most probable token (the first on ties), without its log-probability
    /// where the host can skip it ([`HostScores::best_token`]): `None` where nothing is
    /// allowed.
    pub(crate) async fn best_tokens(&mut self) -> Result<Vec<Option<u32>>> {
        match self {
            Scores::Device(_) => Ok(self
                .best()
                .await?
                .into_iter()
                .map(|(id, lp)| (lp > f64::NEG_INFINITY).then_some(id))
                .collect()),
            Scores::Host(scores) => {
                let mut ranked = Vec::with_capacity(2);
                Ok((0..scores.rows())
                    .map(|r| scores.best_token(r, &mut ranked))
                    .collect())
            }
        }
    }

    /// Each row's most probable token and its log-probability (the first on ties).
    pub(crate) async fn best(&mut self) -> Result<Vec<(u32, f64)>> {
        match self {
            Scores::Device(t) => {
                // On the device: two numbers per row cross to the host.
                let (best, ids) = (**t).clone().max_dim_with_indices(1);
                let best = read(best).await?;
                let ids = read_int(ids).await?;
                Ok(ids
                    .iter()
                    .zip(best)
                    .map(|(&id, lp)| (id as u32, lp as f64))
                    .collect())
            }
            Scores::Host(scores) => {
                let mut ranked = Vec::with_capacity(2);
                Ok((0..scores.rows())
                    .map(|r| {
                        scores.best(r, None, 0.0, 1, &mut ranked);
                        ranked
                            .first()
                            .map_or((0, f64::NEG_INFINITY), |&(lp, id)| (id, lp))
                    })
                    .collect())
            }
        }
    }
}
