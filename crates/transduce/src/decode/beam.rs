//! Beam search with the GNMT length penalty (§6.1), batched over sentences.
//!
//! Per sentence and step, the 2k best extensions of the k live beams are ranked; an EOS
//! among the first k ranks finishes a hypothesis, the first k non-EOS extensions live on
//! (so k = 1 is exactly greedy). A sentence is done when k hypotheses have finished, or
//! when no live beam can still beat the best finished one: log-probabilities are ≤ 0 and
//! lp grows with length, so a live beam's best possible final score is
//! `log_prob / lp(max_len)`. With |Y|^α normalisation ([`LengthNorm::Power`], imported
//! Marian models) the search stops where transformers' `generate` stops instead, so their
//! outputs agree ([`Search::generate_would_stop`]).

use super::ensemble::Scores;
use super::{Constraint, DecodeOptions, Ensemble, Hypothesis, LengthNorm, Penalty, allowed_tokens};
use crate::error::{Error, Result};
use crate::tokenizer::{BOS, EOS};

#[derive(Clone, Debug)]
struct Beam {
    tokens: Vec<u32>,
    log_prob: f64,
}

struct Search {
    live: Vec<Beam>,
    finished: Vec<Hypothesis>,
    limit: usize,
    done: bool,
}

impl Search {
    /// Best final score any live beam could still reach.
    fn live_bound(&self, penalty: Penalty) -> f64 {
        let best = self
            .live
            .iter()
            .map(|b| b.log_prob)
            .fold(f64::NEG_INFINITY, f64::max);
        let next = self.live.first().map_or(1, |b| b.tokens.len() + 1);
        // lp is monotone in length; its largest value over the remaining lengths.
        let lp = penalty.of(next).max(penalty.of(self.limit));
        best / lp
    }

    /// transformers' `generate` stopping rule (`early_stopping=False`,
    /// `_check_early_stop_heuristic`), so that |Y|^α searches end where it ends: once k
    /// hypotheses have finished and the best live beam, normalised by its length so far
    /// (no further token assumed), does not beat the k-th best finished one. A heuristic:
    /// a longer live beam could still have won.
    fn generate_would_stop(&self, k: usize, penalty: Penalty) -> bool {
        if self.finished.len() < k {
            return false;
        }
        let mut scores: Vec<f64> = self.finished.iter().map(|h| h.score).collect();
        scores.sort_by(|a, b| b.total_cmp(a));
        let worst_kept = scores[k - 1];
        let best_live = self.live[0].log_prob;
        let len = self.live[0].tokens.len().max(1);
        best_live / penalty.of(len) <= worst_kept
    }

    fn best_finished(&self) -> f64 {
        self.finished
            .iter()
            .map(|h| h.score)
            .fold(f64::NEG_INFINITY, f64::max)
    }
}

/// Ranking of candidate extensions (score, beam, token): best score first, then the
/// earlier beam, then the smaller token id.
pub fn by_score(a: &(f64, usize, u32), b: &(f64, usize, u32)) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2))
}

/// Beam search over a batch of sources, blocking. Returns each sentence's finished
/// hypotheses, best first. `models` is one model or an [`Ensemble`].
pub fn beam_search<'m>(
    models: impl Into<Ensemble<'m>>,
    sources: &[Vec<u32>],
    options: &DecodeOptions,
    constraint: Option<&dyn Constraint>,
) -> Result<Vec<Vec<Hypothesis>>> {
    pollster::block_on(beam_search_async(models, sources, options, constraint))
}

/// Beam search over a batch of sources; every device read is awaited.
pub async fn beam_search_async<'m>(
    models: impl Into<Ensemble<'m>>,
    sources: &[Vec<u32>],
    options: &DecodeOptions,
    constraint: Option<&dyn Constraint>,
) -> Result<Vec<Vec<Hypothesis>>> {
    let models: Ensemble = models.into();
    models.check(sources, constraint)?;
    let vocab = models.vocab_size();
    let limits: Vec<usize> = sources
        .iter()
        .map(|s| models.max_output_len(s.len(), options))
        .collect();
    let mut search = BeamSearch::new(limits.iter().copied(), options)?;
    let mut caches = models.start(sources)?;
    caches.limit_positions(limits.iter().copied().max().unwrap_or(1));
    let mut last: Vec<u32> = vec![BOS; sources.len()];
    let mut ranked = Vec::new();

    while !search.is_done() {
        let mut all = models
            .step(&mut caches, &last, constraint, &search.prefixes())?
            .into_host()
            .await?;
        let (parents, next) = search.advance(|row, beam, base, n, out| {
            let mask = search_mask(constraint, row, vocab);
            all.best(row.index, mask.as_deref(), base, n, &mut ranked);
            out.extend(ranked.iter().map(|&(score, id)| (score, beam, id)));
        });
        caches.recycle(Scores::Host(all));
        if !parents.is_empty() {
            caches.select(&parents);
        }
        last = next;
    }
    Ok(search.finish())
}

/// One decoder row as [`BeamSearch::advance`] shows it to the scorer.
#[derive(Clone, Copy, Debug)]
pub struct RowView<'a> {
    /// The row's index in the decoder batch.
    pub index: usize,
    /// The sentence it belongs to.
    pub sentence: usize,
    /// Its output so far.
    pub prefix: &'a [u32],
    /// Whether the next token is the last the length limit allows (EOS alone is allowed).
    pub last_position: bool,
}

/// The allowed next tokens of a row: the constraint's, and EOS alone at the length limit.
pub fn search_mask(
    constraint: Option<&dyn Constraint>,
    row: RowView<'_>,
    vocab: usize,
) -> Option<Vec<bool>> {
    allowed_tokens(
        constraint,
        row.sentence,
        row.prefix,
        vocab,
        row.last_position,
    )
}

/// Beam search's bookkeeping (§6.1), whatever computes the scores: which (sentence, beam)
/// each decoder row holds, what a step's ranked extensions make of the beams, and when a
/// sentence is done. The host search above and the GPU decoder both drive it, so they
/// choose identically from identical candidates.
pub struct BeamSearch {
    searches: Vec<Search>,
    /// Row r of the decoder batch is live beam `rows[r].1` of sentence `rows[r].0`.
    rows: Vec<(usize, usize)>,
    k: usize,
    penalty: Penalty,
}

impl BeamSearch {
    /// A search per sentence, each with its output length limit (EOS included); one row
    /// per sentence to start.
    pub fn new(limits: impl IntoIterator<Item = usize>, options: &DecodeOptions) -> Result<Self> {
        if options.beam == 0 {
            return Err(Error::Input("beam size must be at least 1".into()));
        }
        let searches: Vec<Search> = limits
            .into_iter()
            .map(|limit| Search {
                live: vec![Beam {
                    tokens: Vec::new(),
                    log_prob: 0.0,
                }],
                finished: Vec::new(),
                limit,
                done: false,
            })
            .collect();
        Ok(BeamSearch {
            rows: (0..searches.len()).map(|s| (s, 0)).collect(),
            searches,
            k: options.beam,
            penalty: options.penalty(),
        })
    }

    /// No row is left to decode.
    pub fn is_done(&self) -> bool {
        self.rows.is_empty()
    }

    /// The beam size k: each row's scorer gives its 2k best extensions.
    pub fn beam(&self) -> usize {
        self.k
    }

    /// Rows of the next step: (sentence, output so far).
    pub fn prefixes(&self) -> Vec<(usize, &[u32])> {
        self.rows
            .iter()
            .map(|&(s, b)| (s, self.searches[s].live[b].tokens.as_slice()))
            .collect()
    }

    /// Rows of the next step as the scorer sees them.
    pub fn row_views(&self) -> Vec<RowView<'_>> {
        self.rows
            .iter()
            .enumerate()
            .map(|(index, &(s, b))| {
                let search = &self.searches[s];
                let prefix = search.live[b].tokens.as_slice();
                RowView {
                    index,
                    sentence: s,
                    prefix,
                    last_position: prefix.len() + 1 >= search.limit,
                }
            })
            .collect()
    }

    /// One step. `extend(row, beam, base, n, out)` appends to `out` the `n` best allowed
    /// extensions (score `base` + token log-probability, beam, token) of that row, best
    /// first by [`by_score`]. Returns the parents of the next step's rows (row i continues
    /// row `parents[i]`) and their last tokens.
    pub fn advance(
        &mut self,
        mut extend: impl FnMut(RowView<'_>, usize, f64, usize, &mut Vec<(f64, usize, u32)>),
    ) -> (Vec<usize>, Vec<u32>) {
        let (k, penalty) = (self.k, self.penalty);
        let mut next_rows = Vec::new();
        let mut parents = Vec::new();
        let mut next_last = Vec::new();
        let mut r = 0;
        let mut candidates: Vec<(f64, usize, u32)> = Vec::new();
        while r < self.rows.len() {
            let s = self.rows[r].0;
            let n_beams = self.rows[r..].iter().take_while(|(t, _)| *t == s).count();
            let search = &mut self.searches[s];
            let last_position = search.live[0].tokens.len() + 1 >= search.limit;

            // The 2k best allowed extensions of each live beam of this sentence: the 2k
            // best of the sentence are among them.
            candidates.clear();
            for b in 0..n_beams {
                let beam = &search.live[b];
                let row = RowView {
                    index: r + b,
                    sentence: s,
                    prefix: &beam.tokens,
                    last_position,
                };
                extend(row, b, beam.log_prob, 2 * k, &mut candidates);
            }
            candidates.sort_by(by_score);
            candidates.truncate(2 * k);

            let mut live = Vec::with_capacity(k);
            for (rank, &(log_prob, b, id)) in candidates.iter().enumerate() {
                if id == EOS {
                    if rank < k {
                        let tokens = search.live[b].tokens.clone();
                        let len = tokens.len() + 1;
                        search.finished.push(Hypothesis {
                            tokens,
                            log_prob,
                            score: log_prob / penalty.of(len),
                        });
                    }
                } else if live.len() < k {
                    let mut tokens = search.live[b].tokens.clone();
                    tokens.push(id);
                    live.push((Beam { tokens, log_prob }, r + b));
                }
            }
            search.live = live.iter().map(|(beam, _)| beam.clone()).collect();
            search.done = search.live.is_empty()
                || match penalty.norm {
                    LengthNorm::Gnmt => {
                        search.finished.len() >= k
                            || (!search.finished.is_empty()
                                && search.best_finished() >= search.live_bound(penalty))
                    }
                    LengthNorm::Power => search.generate_would_stop(k, penalty),
                };
            if !search.done {
                for (i, (beam, parent)) in live.into_iter().enumerate() {
                    next_rows.push((s, i));
                    parents.push(parent);
                    next_last.push(*beam.tokens.last().unwrap_or(&EOS));
                }
            }
            r += n_beams;
        }
        self.rows = next_rows;
        (parents, next_last)
    }

    /// Each sentence's finished hypotheses, best first.
    pub fn finish(self) -> Vec<Vec<Hypothesis>> {
        let k = self.k;
        self.searches
            .into_iter()
            .map(|mut search| {
                search.finished.sort_by(|a, b| b.score.total_cmp(&a.score));
                // One step can finish several hypotheses at once: keep the k best.
                search.finished.truncate(k);
                search.finished
            })
            .collect()
    }
}
