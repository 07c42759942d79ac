//! `translate --channel`: each line's n-best list reordered by the model crate's
//! noisy-channel ranking ([`transduce::task::channel`]), which the browser module shares.

use transduce::task::channel::Channel;

use crate::line_decoder::Candidate;
use transduce_train::error::Result;

/// Reorders each line's candidates, best first, by
/// `score + weight · log p(X|Y) / lp(|X|)`, which becomes each one's `score`; `alpha` is
/// the forward search's α, `sources[i]` line i's source. A candidate the channel cannot
/// condition on (an empty translation) ranks last; a line whose candidates all are such,
/// and an empty line, keep the beam's order and scores. Weight 0 changes nothing.
pub fn rerank(
    channel: &Channel,
    sources: &[String],
    lists: &mut [Vec<Candidate>],
    alpha: f64,
) -> Result<()> {
    if channel.weight == 0.0 {
        return Ok(());
    }
    let texts: Vec<Vec<String>> = lists
        .iter()
        .map(|list| list.iter().map(|c| c.text.clone()).collect())
        .collect();
    let scores = channel.scores(sources, &texts, alpha)?;
    for (list, scores) in lists.iter_mut().zip(scores) {
        let beam: Vec<f64> = list.iter().map(|c| c.score).collect();
        let mut old: Vec<Option<Candidate>> = list.drain(..).map(Some).collect();
        *list = channel
            .rank(&beam, &scores)
            .into_iter()
            .map(|(k, score)| Candidate {
                score,
                ..old[k].take().expect("rank gives each index once")
            })
            .collect();
    }
    Ok(())
}
