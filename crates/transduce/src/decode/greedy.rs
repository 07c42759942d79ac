//! Greedy decoding: the most probable token at every step, many sentences at once.

use super::{
    Constraint, DecodeOptions, Hypothesis, allowed_tokens, check_focus, check_sources,
    focus_tensor, length_penalty, max_output_len, next_log_probs, read, read_int, rows_tensor,
    tokens_tensor,
};
use crate::error::Result;
use crate::model::{Transformer, token_tensor};
use crate::tokenizer::{BOS, EOS};

/// Greedy decoding of a batch of sources (ids without BOS/EOS), blocking.
pub fn greedy(
    model: &Transformer,
    sources: &[Vec<u32>],
    options: &DecodeOptions,
    constraint: Option<&dyn Constraint>,
) -> Result<Vec<Hypothesis>> {
    pollster::block_on(greedy_async(model, sources, options, constraint))
}

/// Greedy decoding of a batch of sources; every device read is awaited.
///
/// Each row stops at EOS; a row that reaches its length limit must emit EOS there.
/// Finished rows leave the batch, so the caches shrink as sentences end.
pub async fn greedy_async(
    model: &Transformer,
    sources: &[Vec<u32>],
    options: &DecodeOptions,
    constraint: Option<&dyn Constraint>,
) -> Result<Vec<Hypothesis>> {
    check_sources(model, sources)?;
    check_focus(model, constraint)?;
    let device = model.device();
    let vocab = model.config().vocab_size;
    let memory = model.encode(token_tensor(sources, &device)?);
    let mut state = model.start_decoding(&memory);
    let limits: Vec<usize> = sources
        .iter()
        .map(|s| max_output_len(model, s.len(), options))
        .collect();

    let mut outputs: Vec<Hypothesis> = sources
        .iter()
        .map(|_| Hypothesis {
            tokens: Vec::new(),
            log_prob: 0.0,
            score: 0.0,
        })
        .collect();
    // Row r of the batch decodes sentence active[r].
    let mut active: Vec<usize> = (0..sources.len()).collect();
    let mut last: Vec<u32> = vec![BOS; sources.len()];

    while !active.is_empty() {
        let focus = focus_tensor(
            model,
            constraint,
            active.iter().map(|&s| (s, outputs[s].tokens.as_slice())),
            &device,
        );
        let logits = model.decode_step_focused(&mut state, tokens_tensor(&last, &device), focus);
        let log_probs = next_log_probs(model, logits);
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
        let picks: Vec<(u32, f64)> = if masks.iter().all(Option::is_none) {
            // Fast path: argmax on the device, read two numbers per row.
            let (best, ids) = log_probs.max_dim_with_indices(1);
            let best = read(best).await?;
            let ids = read_int(ids).await?;
            ids.iter()
                .zip(best)
                .map(|(&id, lp)| (id as u32, lp as f64))
                .collect()
        } else {
            let all = read(log_probs).await?;
            masks
                .iter()
                .enumerate()
                .map(|(r, mask)| {
                    let row = &all[r * vocab..(r + 1) * vocab];
                    let mut best = (EOS, f64::NEG_INFINITY);
                    for (id, &lp) in row.iter().enumerate() {
                        let ok = mask.as_ref().is_none_or(|m| m[id]);
                        if ok && (lp as f64) > best.1 {
                            best = (id as u32, lp as f64);
                        }
                    }
                    best
                })
                .collect()
        };

        let mut keep = Vec::with_capacity(active.len());
        let mut next_active = Vec::with_capacity(active.len());
        last.clear();
        for (r, (&s, (token, lp))) in active.iter().zip(picks).enumerate() {
            let out = &mut outputs[s];
            out.log_prob += lp;
            if token == EOS || !lp.is_finite() {
                let len = out.tokens.len() + 1;
                out.score = out.log_prob / length_penalty(len, options.alpha);
            } else {
                out.tokens.push(token);
                keep.push(r);
                next_active.push(s);
                last.push(token);
            }
        }
        if next_active.len() < active.len() && !next_active.is_empty() {
            state = state.select(rows_tensor(&keep, &device));
        }
        active = next_active;
    }
    Ok(outputs)
}
