//! A batch's token ids and tensors: teacher-forced inputs and outputs, padded to its shape
//! class where batches are shaped.

use transduce::Transformer;
use transduce::burn::prelude::*;
use transduce::model::token_tensor;
use transduce::task::focus::WordFocus;
use transduce::train::TeacherForced;

use crate::data::batch::Batch;
use crate::data::cache::Pairs;
use crate::data::shape;
use crate::error::Result;

/// Training pairs with the word-focus rule their model needs, if any.
#[derive(Clone, Copy)]
pub struct Examples<'a> {
    pub pairs: &'a Pairs,
    pub focus: Option<&'a WordFocus>,
    /// `Some(max_tokens)`: each batch padded to its shape class under this budget
    /// ([`crate::data::shape`]).
    pub classes: Option<usize>,
}

impl Examples<'_> {
    /// The padded shape a batch trains in, if batches are shaped by class.
    pub fn shape(&self, batch: &Batch) -> Option<(usize, usize)> {
        let pairs = self.pairs;
        self.classes.map(|budget| {
            shape::batch_shape(
                |i| pairs.src[i].len(),
                |i| pairs.tgt[i].len(),
                batch,
                budget,
            )
        })
    }
}

/// One batch on the device: source, decoder inputs (BOS + target), outputs (target + EOS)
/// and, for word-focus models, the focus of every decoder input.
pub struct BatchTensors {
    pub src: Tensor<2, Int>,
    pub tgt_in: Tensor<2, Int>,
    pub tgt_out: Tensor<2, Int>,
    pub focus: Option<Tensor<2, Int>>,
}

impl BatchTensors {
    /// The teacher-forced logits of the batch.
    pub fn logits(self, model: &Transformer) -> (Tensor<3>, Tensor<2, Int>) {
        (
            model.forward_focused(self.src, self.tgt_in, self.focus),
            self.tgt_out,
        )
    }
}

/// The tensors of a batch; `focus` for word-focus models; `shape`: padded to these rows
/// and length ([`shape::pad_to_shape`]).
pub fn batch_tensors(
    pairs: &Pairs,
    batch: &Batch,
    focus: Option<&WordFocus>,
    shape: Option<(usize, usize)>,
    device: &Device,
) -> Result<BatchTensors> {
    let forced = teacher_forced(pairs, batch);
    let TeacherForced {
        sources: src,
        inputs: tgt_in,
        outputs: tgt_out,
    } = match shape {
        Some(shape) => shape::pad_to_shape(forced, shape),
        None => forced,
    };
    Ok(BatchTensors {
        focus: focus.map(|rule| rule.tensor(&src, &tgt_in, device)),
        src: token_tensor(&src, device)?,
        tgt_in: token_tensor(&tgt_in, device)?,
        tgt_out: token_tensor(&tgt_out, device)?,
    })
}

/// The token ids a batch trains on ([`transduce::train::teacher_forced`], shared with
/// adaptation in the browser).
pub fn teacher_forced(pairs: &Pairs, batch: &Batch) -> TeacherForced {
    transduce::train::teacher_forced(
        batch
            .iter()
            .map(|&i| (&pairs.src[i][..], &pairs.tgt[i][..])),
    )
}

/// Target tokens (EOS included) of a batch: what the loss is averaged over.
pub fn target_tokens(pairs: &Pairs, batch: &Batch) -> usize {
    batch.iter().map(|&i| pairs.tgt[i].len() + 1).sum()
}
