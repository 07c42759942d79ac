//! Noisy-channel reranking (Yee et al. 2019): the reverse translator checks how well each
//! of the beam's finished translations explains the source. A translation that drops or
//! invents content makes the source unlikely, which the forward model alone cannot see
//! (§6.1's beam ranks by log p(Y|X) / lp(|Y|) only).

use transduce::Bundle;
use transduce::decode::{Ensemble, forced_log_probs, length_penalty};

use crate::error::Result;
use crate::translate::Candidate;

/// Pairs teacher-forced together: enough rows to fill the matrix products, few enough
/// that the caches stay small.
const BATCH_ROWS: usize = 64;

/// The reverse translator and its term's weight.
pub struct Channel<'a> {
    pub bundle: &'a Bundle,
    pub weight: f64,
}

impl Channel<'_> {
    /// Reorders each line's candidates, best first, by
    /// `score + weight · log p(X|Y) / lp(|X|)`, which becomes each one's `score`; `alpha`
    /// is the forward search's α, `sources[i]` line i's source. A candidate the channel
    /// cannot condition on (an empty translation) ranks last; a line whose candidates all
    /// are such, and an empty line, keep the beam's order and scores. Weight 0 changes
    /// nothing. The reverse model scores by teacher forcing through the search's own
    /// decoder ([`forced_log_probs`]): on the CPU the host decoder, int8 for int8 bundles.
    pub fn rerank(
        &self,
        sources: &[String],
        lists: &mut [Vec<Candidate>],
        alpha: f64,
    ) -> Result<()> {
        if self.weight == 0.0 {
            return Ok(());
        }
        let tokenizer = &self.bundle.tokenizer;
        let config = &self.bundle.config.model;
        // One teacher-forced pair per candidate the channel can score: the candidate as
        // source, the line's source as target, and where it came from (line, index).
        let mut pairs: Vec<(Vec<u32>, Vec<u32>, usize, usize)> = Vec::new();
        for (line, (source, list)) in sources.iter().zip(lists.iter()).enumerate() {
            let target = tokenizer.encode(source.trim())?;
            if target.is_empty() || config.check_length(target.len() + 1).is_err() {
                continue;
            }
            for (k, candidate) in list.iter().enumerate() {
                let src = tokenizer.encode(candidate.text.trim())?;
                if src.is_empty() || config.check_length(src.len()).is_err() {
                    continue;
                }
                pairs.push((src, target.clone(), line, k));
            }
        }
        // Similar lengths together, so padding stays small.
        pairs.sort_by_key(|(src, tgt, ..)| (src.len(), tgt.len()));
        let scorer = Ensemble::of_bundles(std::slice::from_ref(self.bundle))?;
        let mut channel: Vec<Vec<Option<f64>>> =
            lists.iter().map(|list| vec![None; list.len()]).collect();
        for batch in pairs.chunks(BATCH_ROWS) {
            let (srcs, tgts): (Vec<Vec<u32>>, Vec<Vec<u32>>) = batch
                .iter()
                .map(|(s, t, ..)| (s.clone(), t.clone()))
                .unzip();
            let sums = forced_log_probs(scorer.clone(), &srcs, &tgts)?;
            for ((_, tgt, line, k), sum) in batch.iter().zip(sums) {
                channel[*line][*k] = Some(sum / length_penalty(tgt.len() + 1, alpha));
            }
        }
        for (list, channel) in lists.iter_mut().zip(channel) {
            if channel.iter().all(Option::is_none) {
                continue;
            }
            let mut ranked: Vec<Candidate> = list
                .drain(..)
                .zip(channel)
                .map(|(c, ch)| Candidate {
                    score: ch.map_or(f64::NEG_INFINITY, |ch| c.score + self.weight * ch),
                    ..c
                })
                .collect();
            // Stable: on a tie the beam's order stays.
            ranked.sort_by(|a, b| b.score.total_cmp(&a.score));
            *list = ranked;
        }
        Ok(())
    }
}
