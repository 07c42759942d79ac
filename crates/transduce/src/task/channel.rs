//! Noisy-channel reranking (Yee et al. 2019, without their language model): the reverse
//! translator checks how well each of the beam's finished translations explains the
//! source. A translation that drops or invents content makes the source unlikely, which
//! the forward model alone cannot see (§6.1's beam ranks by log p(Y|X) / lp(|Y|) only).
//!
//! Candidates are ranked by `score + weight · log p(X|Y) / lp(|X|)`, p(X|Y) the reverse
//! model's by teacher forcing through the search's own decoder
//! ([`forced_log_probs_async`]): on the CPU the host decoder, int8 for int8 bundles. The
//! CLI (`translate --channel`) and the browser module both rank through this module, so
//! they choose alike.

use crate::bundle::{Bundle, Task};
use crate::decode::{Ensemble, forced_log_probs_async, length_penalty};
use crate::error::{Error, Result};

/// Pairs teacher-forced together: enough rows to fill the matrix products, few enough
/// that the caches stay small.
const BATCH_ROWS: usize = 64;

/// The reverse translator and its term's weight.
#[derive(Clone, Copy)]
pub struct Channel<'a> {
    pub bundle: &'a Bundle,
    pub weight: f64,
}

impl<'a> Channel<'a> {
    /// `reverse` checking `forward`'s translations with `weight`. Bundles that name their
    /// languages must be the reverse pair (target → source); a parser is refused.
    pub fn new(forward: &Bundle, reverse: &'a Bundle, weight: f64) -> Result<Channel<'a>> {
        if !weight.is_finite() {
            return Err(Error::Input(format!(
                "the channel weight must be a finite number, not {weight}"
            )));
        }
        let Task::Translate { source, target } = &reverse.config.task else {
            return Err(Error::Input(
                "the channel model is a parser; it must be a translator".into(),
            ));
        };
        if let Task::Translate {
            source: fwd_source,
            target: fwd_target,
        } = &forward.config.task
            && [source, target, fwd_source, fwd_target]
                .iter()
                .all(|l| !l.is_empty())
            && (source != fwd_target || target != fwd_source)
        {
            return Err(Error::Input(format!(
                "the channel model translates {source}→{target}; reranking \
                 {fwd_source}→{fwd_target} needs a model from {fwd_target} to {fwd_source}"
            )));
        }
        Ok(Channel {
            bundle: reverse,
            weight,
        })
    }

    /// log p(X|Y) / lp(|X|) of each candidate Y of each source X (`candidates[i]` are
    /// `sources[i]`'s), `alpha` the forward search's α. `None` where the channel cannot
    /// condition on the candidate (an empty translation, one too long for its positions)
    /// and for every candidate of an empty or too long source.
    pub async fn scores_async(
        &self,
        sources: &[String],
        candidates: &[Vec<String>],
        alpha: f64,
    ) -> Result<Vec<Vec<Option<f64>>>> {
        if sources.len() != candidates.len() {
            return Err(Error::Input(format!(
                "{} sources but {} candidate lists",
                sources.len(),
                candidates.len()
            )));
        }
        let tokenizer = &self.bundle.tokenizer;
        let config = &self.bundle.config.model;
        // One teacher-forced pair per candidate the channel can score: the candidate as
        // source, the line's source as target, and where it came from (line, index).
        let mut pairs: Vec<(Vec<u32>, Vec<u32>, usize, usize)> = Vec::new();
        for (line, (source, list)) in sources.iter().zip(candidates).enumerate() {
            let target = tokenizer.encode(source.trim())?;
            if target.is_empty() || config.check_length(target.len() + 1).is_err() {
                continue;
            }
            for (k, candidate) in list.iter().enumerate() {
                let src = tokenizer.encode(candidate.trim())?;
                if src.is_empty() || config.check_length(src.len()).is_err() {
                    continue;
                }
                pairs.push((src, target.clone(), line, k));
            }
        }
        // Similar lengths together, so padding stays small.
        pairs.sort_by_key(|(src, tgt, ..)| (src.len(), tgt.len()));
        let scorer = Ensemble::of_bundles(std::slice::from_ref(self.bundle))?;
        let mut scores: Vec<Vec<Option<f64>>> = candidates
            .iter()
            .map(|list| vec![None; list.len()])
            .collect();
        for batch in pairs.chunks(BATCH_ROWS) {
            let (srcs, tgts): (Vec<Vec<u32>>, Vec<Vec<u32>>) = batch
                .iter()
                .map(|(s, t, ..)| (s.clone(), t.clone()))
                .unzip();
            let sums = forced_log_probs_async(scorer.clone(), &srcs, &tgts).await?;
            for ((_, tgt, line, k), sum) in batch.iter().zip(sums) {
                scores[*line][*k] = Some(sum / length_penalty(tgt.len() + 1, alpha));
            }
        }
        Ok(scores)
    }

    /// [`Channel::scores_async`], blocking.
    pub fn scores(
        &self,
        sources: &[String],
        candidates: &[Vec<String>],
        alpha: f64,
    ) -> Result<Vec<Vec<Option<f64>>>> {
        pollster::block_on(self.scores_async(sources, candidates, alpha))
    }

    /// One list's ranking, best first, with this channel's weight: see [`rank`].
    pub fn rank(&self, beam: &[f64], channel: &[Option<f64>]) -> Vec<(usize, f64)> {
        rank(self.weight, beam, channel)
    }
}

/// One list's ranking, best first: each candidate's index and its combined score
/// `beam + weight · channel`, from the beam's scores and [`Channel::scores_async`]'s. A
/// candidate without a channel score ranks last (score −∞); a list where none has one,
/// and weight 0, keep the beam's order and scores. Stable: on a tie the beam's order stays.
pub fn rank(weight: f64, beam: &[f64], channel: &[Option<f64>]) -> Vec<(usize, f64)> {
    if weight == 0.0 || channel.iter().all(Option::is_none) {
        return beam.iter().copied().enumerate().collect();
    }
    let mut ranked: Vec<(usize, f64)> = beam
        .iter()
        .zip(channel)
        .enumerate()
        .map(|(k, (&b, ch))| (k, ch.map_or(f64::NEG_INFINITY, |ch| b + weight * ch)))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    ranked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_by_the_hand_computed_sum() {
        // -1.0 + 0.5·-4.0 = -3.0; -1.5 + 0.5·-1.0 = -2.0; the third has no channel score.
        let r = rank(0.5, &[-1.0, -1.5, -0.5], &[Some(-4.0), Some(-1.0), None]);
        assert_eq!(r, vec![(1, -2.0), (0, -3.0), (2, f64::NEG_INFINITY)]);
    }

    #[test]
    fn weight_zero_and_unscored_lists_keep_the_beams_order() {
        let beam = [-1.0, -2.0];
        let want = vec![(0, -1.0), (1, -2.0)];
        assert_eq!(rank(0.0, &beam, &[Some(-9.0), Some(0.0)]), want);
        assert_eq!(rank(0.7, &beam, &[None, None]), want);
    }

    #[test]
    fn ties_keep_the_beams_order() {
        // -1 + 1·-1 = -2 and -1.5 + 1·-0.5 = -2.
        let r = rank(1.0, &[-1.0, -1.5], &[Some(-1.0), Some(-0.5)]);
        assert_eq!(r, vec![(0, -2.0), (1, -2.0)]);
    }
}
