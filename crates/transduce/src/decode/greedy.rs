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
    let models: Ensemble = models.into();
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
            (scores.best(vocab).await?, scores)
        } else {
            let all = scores.into_host().await?;
            let picks = masks
                .iter()
                .enumerate()
                .map(|(r, mask)| {
                    let (row, shift) = all.row(r);
                    let mut best = (EOS, f64::NEG_INFINITY);
                    for (id, &v) in row.iter().enumerate() {
                        let lp = v - shift;
                        let ok = mask.as_ref().is_none_or(|m| m[id]);
                        if ok && (lp as f64) > best.1 {
                            best = (id as u32, lp as f64);
                        }
                    }
                    best
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
