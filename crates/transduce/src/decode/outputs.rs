//! What callers decode with: each source's hypotheses or best output ids, by greedy
//! search or beam search as the options say, blocking or awaited.

use super::beam::beam_search_async;
use super::greedy::{greedy_async, greedy_outputs_async};
use super::{Constraint, DecodeOptions, Ensemble, Hypothesis};
use crate::error::Result;

/// The best output ids of each source: greedy for `beam <= 1`, beam search otherwise, both
/// through `constraint` when given. `models` is one model or an [`Ensemble`]. Every device
/// read is awaited.
pub async fn best_outputs_async<'m>(
    models: impl Into<Ensemble<'m>>,
    sources: &[Vec<u32>],
    options: &DecodeOptions,
    constraint: Option<&dyn Constraint>,
) -> Result<Vec<Vec<u32>>> {
    let models: Ensemble = models.into();
    if options.beam <= 1 {
        // Nothing reads the scores here: greedy skips the softmax where it can.
        return greedy_outputs_async(models, sources, options, constraint).await;
    }
    Ok(best_of_each(
        hypotheses_async(models, sources, options, constraint).await?,
    ))
}

/// Each source's finished hypotheses, best first: greedy's one for `beam <= 1`, beam
/// search's (at most `beam`) otherwise. The n-best lists `translate --nbest` writes.
pub async fn hypotheses_async<'m>(
    models: impl Into<Ensemble<'m>>,
    sources: &[Vec<u32>],
    options: &DecodeOptions,
    constraint: Option<&dyn Constraint>,
) -> Result<Vec<Vec<Hypothesis>>> {
    let models: Ensemble = models.into();
    if options.beam <= 1 {
        Ok(greedy_async(&models, sources, options, constraint)
            .await?
            .into_iter()
            .map(|h| vec![h])
            .collect())
    } else {
        beam_search_async(&models, sources, options, constraint).await
    }
}

/// [`hypotheses_async`], blocking (native callers).
pub fn hypotheses<'m>(
    models: impl Into<Ensemble<'m>>,
    sources: &[Vec<u32>],
    options: &DecodeOptions,
    constraint: Option<&dyn Constraint>,
) -> Result<Vec<Vec<Hypothesis>>> {
    pollster::block_on(hypotheses_async(models, sources, options, constraint))
}

/// Each sentence's best hypothesis (the first: searches return them best first), as ids.
pub fn best_of_each(hypotheses: Vec<Vec<Hypothesis>>) -> Vec<Vec<u32>> {
    hypotheses
        .into_iter()
        .map(|hyps| {
            hyps.into_iter()
                .next()
                .map(|h| h.tokens)
                .unwrap_or_default()
        })
        .collect()
}

/// [`best_outputs_async`], blocking (native callers).
pub fn best_outputs<'m>(
    models: impl Into<Ensemble<'m>>,
    sources: &[Vec<u32>],
    options: &DecodeOptions,
    constraint: Option<&dyn Constraint>,
) -> Result<Vec<Vec<u32>>> {
    pollster::block_on(best_outputs_async(models, sources, options, constraint))
}
