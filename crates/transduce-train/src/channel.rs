//! Noisy-channel reranking (Yee et al. 2019): the reverse translator checks how well each
//! of the beam's finished translations explains the source. A translation that drops or
//! invents content makes the source unlikely, which the forward model alone cannot see
//! (§6.1's beam ranks by log p(Y|X) / lp(|Y|) only).

use transduce::Bundle;
use transduce::decode::length_penalty;

use crate::data::cache::Pairs;
use crate::error::Result;
use crate::train;
use crate::translate::Candidate;

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
    /// nothing.
    pub fn rerank(
        &self,
        sources: &[String],
        lists: &mut [Vec<Candidate>],
        alpha: f64,
        max_tokens: usize,
    ) -> Result<()> {
        if self.weight == 0.0 {
            return Ok(());
        }
        let tokenizer = &self.bundle.tokenizer;
        let config = &self.bundle.config.model;
        // One teacher-forced pair per candidate the channel can score: (line, index).
        let mut pairs = Pairs::default();
        let mut at = Vec::new();
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
                pairs.push(src, target.clone());
                at.push((line, k));
            }
        }
        let focus = train::focus_rule(config, tokenizer)?;
        let sums =
            train::sentence_log_probs(&self.bundle.model, &pairs, focus.as_ref(), max_tokens)?;
        let mut channel: Vec<Vec<Option<f64>>> =
            lists.iter().map(|list| vec![None; list.len()]).collect();
        for (((line, k), sum), target) in at.iter().zip(sums).zip(&pairs.tgt) {
            channel[*line][*k] = Some(sum / length_penalty(target.len() + 1, alpha));
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
