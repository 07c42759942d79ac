//! Validation: the mean NLL per target wordpiece over a data set (its exponential is the
//! perplexity of Table 3), each pair's log-probability for `transduce score`, and a run's
//! validation records.

use transduce::Transformer;
use transduce::burn::prelude::*;
use transduce::task::focus::WordFocus;
use transduce::train::loss;

use super::Trainer;
use super::checkpoint::TrainState;
use super::log::RunLog;
use crate::data::batch::make_batches;
use crate::data::cache::Pairs;
use crate::data::shape::Shapes;
use crate::error::Result;
use crate::train::batches::{Examples, batch_tensors, target_tokens};
use crate::train::read::{read_scalars, values};

/// Mean NLL per target wordpiece over a data set, without dropout or smoothing: the
/// perplexity the paper reports (Table 3) is its exponential.
pub fn evaluate_nll(
    model: &Transformer,
    pairs: &Pairs,
    focus: Option<&WordFocus>,
    max_tokens: usize,
    shapes: Shapes,
) -> Result<f64> {
    let device = model.device();
    let src_lens: Vec<usize> = pairs.src.iter().map(Vec::len).collect();
    let tgt_lens: Vec<usize> = pairs.tgt.iter().map(Vec::len).collect();
    let examples = Examples {
        pairs,
        focus,
        classes: shapes.classes(max_tokens),
    };
    let (mut sums, mut tokens) = (Vec::new(), 0usize);
    for batch in shapes.batches(&src_lens, &tgt_lens, max_tokens) {
        let (logits, tgt_out) =
            batch_tensors(pairs, &batch, focus, examples.shape(&batch), &device)?.logits(model);
        sums.push(loss::label_smoothed(logits, tgt_out, 0.0, model.fused()).nll);
        tokens += target_tokens(pairs, &batch);
    }
    // Every batch's sum in one read.
    let total: f64 = read_scalars(sums)?.iter().sum();
    Ok(total / tokens.max(1) as f64)
}

/// log p(target | source) of every pair (natural log, EOS included), in the pairs' order,
/// batched by length as [`evaluate_nll`] batches them: what `transduce score` writes.
pub fn sentence_log_probs(
    model: &Transformer,
    pairs: &Pairs,
    focus: Option<&WordFocus>,
    max_tokens: usize,
) -> Result<Vec<f64>> {
    let device = model.device();
    let src_lens: Vec<usize> = pairs.src.iter().map(Vec::len).collect();
    let tgt_lens: Vec<usize> = pairs.tgt.iter().map(Vec::len).collect();
    let mut out = vec![0.0; pairs.len()];
    for batch in make_batches(&src_lens, &tgt_lens, max_tokens) {
        let (logits, tgt_out) = batch_tensors(pairs, &batch, focus, None, &device)?.logits(model);
        let sums = values(loss::row_log_probs(logits, tgt_out))?;
        for (&i, sum) in batch.iter().zip(sums) {
            out[i] = sum;
        }
    }
    Ok(out)
}

impl Trainer<'_> {
    /// Validates `model` (if the run has validation pairs), prints and logs the result.
    pub(super) fn validate(
        &self,
        model: &Transformer,
        log: &mut RunLog,
        state: &TrainState,
    ) -> Result<Option<f64>> {
        let Some(valid) = self.valid else {
            return Ok(None);
        };
        let nll = evaluate_nll(
            &model.valid(),
            valid,
            self.focus.as_ref(),
            self.config.options.max_tokens,
            self.config.options.shapes,
        )?;
        log.bar.println(format!(
            "step {}: validation loss {nll:.4}, perplexity {:.3}",
            state.step,
            nll.exp()
        ));
        let record =
            serde_json::json!({"step": state.step, "valid_nll": nll, "valid_ppl": nll.exp()});
        log.write(&record)?;
        Ok(Some(nll))
    }
}
