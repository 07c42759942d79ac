//! Teacher forcing through the search's own scorer: log p(Y | X) of given outputs, each
//! token scored one decoder step at a time as the search scores it (§6.1's decoder, its
//! caches, the same arithmetic: int8 on the host for int8 models). What rescoring needs
//! (noisy-channel reranking, n-best rescoring) on every decoder the search runs on.

use super::Ensemble;
use super::ensemble::Scores;
use crate::error::{Error, Result};
use crate::tokenizer::{BOS, EOS, PAD};

/// log p(targets[i] | sources[i]) for each pair (natural log, EOS included), blocking.
/// `targets` are output ids without BOS and EOS. `models` is one model or an [`Ensemble`]
/// (its mean of log-probabilities).
pub fn forced_log_probs<'m>(
    models: impl Into<Ensemble<'m>>,
    sources: &[Vec<u32>],
    targets: &[Vec<u32>],
) -> Result<Vec<f64>> {
    pollster::block_on(forced_log_probs_async(models, sources, targets))
}

/// [`forced_log_probs`]; every device read is awaited. Rows leave the batch as their
/// targets end, so the caches shrink as in greedy decoding.
pub async fn forced_log_probs_async<'m>(
    models: impl Into<Ensemble<'m>>,
    sources: &[Vec<u32>],
    targets: &[Vec<u32>],
) -> Result<Vec<f64>> {
    let models: Ensemble = models.into();
    if sources.len() != targets.len() {
        return Err(Error::Input(format!(
            "{} sources but {} targets",
            sources.len(),
            targets.len()
        )));
    }
    models.check(sources, None)?;
    let vocab = models.vocab_size();
    for (i, target) in targets.iter().enumerate() {
        if let Some(&id) = target
            .iter()
            .find(|&&id| id as usize >= vocab || [PAD, BOS, EOS].contains(&id))
        {
            return Err(Error::Input(format!(
                "target {i}: id {id} is a special token or outside the vocabulary of {vocab}"
            )));
        }
        // The target as decoder input (BOS + ids) must fit the positions, like a source.
        for config in models.configs() {
            config.check_length(target.len() + 1)?;
        }
    }
    let mut sums = vec![0.0f64; sources.len()];
    if sources.is_empty() {
        return Ok(sums);
    }
    let mut caches = models.start(sources)?;
    // Row r of the batch scores pair active[r]; `at` tokens of each are scored so far.
    let mut active: Vec<usize> = (0..sources.len()).collect();
    let mut last: Vec<u32> = vec![BOS; sources.len()];
    let mut at = 0usize;
    while !active.is_empty() {
        let prefixes: Vec<(usize, &[u32])> =
            active.iter().map(|&s| (s, &targets[s][..at])).collect();
        let scores = models.step(&mut caches, &last, None, &prefixes)?;
        let mut all = scores.into_host().await?;
        let mut keep = Vec::with_capacity(active.len());
        let mut next_active = Vec::with_capacity(active.len());
        last.clear();
        for (r, &s) in active.iter().enumerate() {
            let token = targets[s].get(at).copied().unwrap_or(EOS);
            let (row, shift) = all.row(r);
            sums[s] += (row[token as usize] - shift) as f64;
            if token != EOS {
                keep.push(r);
                next_active.push(s);
                last.push(token);
            }
        }
        caches.recycle(Scores::Host(all));
        if next_active.len() < active.len() && !next_active.is_empty() {
            caches.select(&keep);
        }
        active = next_active;
        at += 1;
    }
    Ok(sums)
}
