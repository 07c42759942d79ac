//! Greedy decoding: the most probable token at every step, many sentences at once.

use super::ensemble::Scores;
use super::{Constraint, DecodeOptions, Ensemble, Hypothesis, Penalty, allowed_tokens};
use crate::error::Result;
use crate::tokenizer::{BOS, EOS};

/// Greedy decoding of a batch of sources (ids without BOS/EOS), blocking. `models` is one
/// model or an [`Ensemble`].
pub fn greedy<'m>(
    models: impl Into<Ensemble<'m>>,
    sources: &[Vec<u32>],
    options: &DecodeOptions,
    constraint: Option<&dyn Constraint>,
) -> Result<Vec<Hypothesis>> {
    pollster::block_on(greedy_async(models, sources, options, constraint))
}

/// Greedy decoding of a batch of sources; every device read is awaited.
///
/// Each row stops at EOS; a row that reaches its length limit must emit EOS there.
/// Finished rows leave the batch, so the caches shrink as sentences end.
pub async fn greedy_async<'m>(
    models: impl Into<Ensemble<'m>>,
    sources: &[Vec<u32>],
    options: &DecodeOptions,
    constraint: Option<&dyn Constraint>,
) -> Result<Vec<Hypothesis>> {
    search(models.into(), sources, options, constraint, Scored::Yes).await
}

/// Greedy decoding's output ids alone: the same ids as [`greedy_async`], without the
/// softmax where no rounding can change the choice ([`Scored::No`]).
pub(crate) async fn greedy_outputs_async(
    models: Ensemble<'_>,
    sources: &[Vec<u32>],
    options: &DecodeOptions,
    constraint: Option<&dyn Constraint>,
) -> Result<Vec<Vec<u32>>> {
    Ok(search(models, sources, options, constraint, Scored::No)
        .await?
        .into_iter()
        .map(|h| h.tokens)
        .collect())
}

/// Whether a search keeps each output's log-probability and score.
#[derive(Clone, Copy, PartialEq)]
enum Scored {
    Yes,
    /// Tokens only: the log-probabilities and scores of the outputs are not computed
    /// (they read 0), and rows without a constraint skip the softmax's exponentials
    /// wherever the best logit's lead is clear of rounding.
    No,
}

async fn search(
    models: Ensemble<'_>,
    sources: &[Vec<u32>],
    options: &DecodeOptions,
    constraint: Option<&dyn Constraint>,
    scored: Scored,
) -> Result<Vec<Hypothesis>> {
    models.check(sources, constraint)?;
    let vocab = models.vocab_size();
    let mut caches = models.start(sources)?;
    let limits: Vec<usize> = sources
        .iter()
        .map(|s| models.max_output_len(s.len(), options))
        .collect();
    caches.limit_positions(limits.iter().copied().max().unwrap_or(1));

    let mut outputs = vec![Hypothesis::default(); sources.len()];
    // Row r of the batch decodes sentence active[r].
    let mut active: Vec<usize> = (0..sources.len()).collect();
    let mut last: Vec<u32> = vec![BOS; sources.len()];

    while !active.is_empty() {
        let prefixes: Vec<(usize, &[u32])> = active
            .iter()
            .map(|&s| (s, outputs[s].tokens.as_slice()))
            .collect();
        let scores = models.step(&mut caches, &last, constraint, &prefixes)?;
        let masks: Vec<Option<Vec<bool>>> = active
            .iter()
            .map(|&s| {
                let len = outputs[s].tokens.len();
                allowed_tokens(
                    constraint,
                    s,
                    &outputs[s].tokens,
                    vocab,
                    len + 1 >= limits[s],
                )
            })
            .collect();
        let (picks, scores): (Vec<(u32, f64)>, Scores) = if masks.iter().all(Option::is_none) {
            let mut scores = scores;
            let picks = match scored {
                Scored::Yes => scores.best().await?,
                // 0 stands for a log-probability not computed; −∞ still ends a row
                // with nothing allowed.
                Scored::No => (scores.best_tokens().await?.into_iter())
                    .map(|id| id.map_or((0, f64::NEG_INFINITY), |id| (id, 0.0)))
                    .collect(),
            };
            (picks, scores)
        } else {
            let mut all = scores.into_host().await?;
            let mut ranked = Vec::with_capacity(1);
            let picks = masks
                .iter()
                .enumerate()
                .map(|(r, mask)| {
                    // The first allowed id of the best log-probability; EOS when none is.
                    all.best(r, mask.as_deref(), 0.0, 1, &mut ranked);
                    ranked
                        .first()
                        .map_or((EOS, f64::NEG_INFINITY), |&(lp, id)| (id, lp))
                })
                .collect();
            (picks, Scores::Host(all))
        };

        caches.recycle(scores);
        let mut keep = Vec::with_capacity(active.len());
        let mut next_active = Vec::with_capacity(active.len());
        last.clear();
        for (r, (&s, (token, lp))) in active.iter().zip(picks).enumerate() {
            if extend(&mut outputs[s], token, lp, options.penalty()) {
                keep.push(r);
                next_active.push(s);
                last.push(token);
            }
        }
        if next_active.len() < active.len() && !next_active.is_empty() {
            caches.select(&keep);
        }
        active = next_active;
    }
    Ok(outputs)
}

/// Greedy's step for one sentence: adds the chosen token's log-probability; EOS (or a row
/// with nothing allowed) finishes the output and scores it, any other token extends it.
/// Returns whether the sentence goes on. Shared with the GPU decoder.
pub fn extend(out: &mut Hypothesis, token: u32, lp: f64, penalty: Penalty) -> bool {
    out.log_prob += lp;
    if token == EOS || !lp.is_finite() {
        let len = out.tokens.len() + 1;
        out.score = out.log_prob / penalty.of(len);
        false
    } else {
        out.tokens.push(token);
        true
    }
}
