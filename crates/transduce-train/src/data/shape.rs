//! Shape classes: batches padded to a few fixed shapes, `rows × length`, instead of one
//! shape per batch.
//!
//! A GPU backend tunes and compiles kernels per tensor shape (fused kernels per exact
//! shape), so token-bucketed batches (§5.1), whose lengths and row counts vary batch by
//! batch, keep a run tuning and compiling for minutes; and a step recorded once as a graph
//! can only be replayed on the shape it was recorded with. Here every pair falls into the
//! class of its longer side (source + EOS or target + BOS/EOS, whichever is longer),
//! rounded up to a multiple of 4 up to 32, of 8 up to 64, of 16 up to 128, of 32 up to
//! 256, of 64 beyond; a class's batches all have `max(1, max_tokens / length)` rows.
//! Pairs left over from a class join the next longer one, so few batches have padding
//! rows; those carry no target (nothing for the loss or the gradients).

use crate::data::batch::Batch;
use transduce::tokenizer::{BOS, EOS, PAD};
use transduce::train::TeacherForced;

/// How training batches are shaped (`train --shapes`).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Shapes {
    /// Each batch as long as its longest pair and as many rows as it holds (the paper's
    /// bucketing, and the CPU backend's default: padding there is only wasted work).
    #[default]
    Exact,
    /// Every batch padded to its shape class (the GPU backends' default).
    Classes,
}

impl Shapes {
    /// The batches of a data set under this policy (§5.1's bucketing, or by class).
    pub fn batches(self, src_lens: &[usize], tgt_lens: &[usize], max_tokens: usize) -> Vec<Batch> {
        match self {
            Shapes::Exact => crate::data::batch::make_batches(src_lens, tgt_lens, max_tokens),
            Shapes::Classes => make_class_batches(src_lens, tgt_lens, max_tokens),
        }
    }

    /// `Some(max_tokens)` where batches are padded to their class ([`batch_shape`]).
    pub fn classes(self, max_tokens: usize) -> Option<usize> {
        (self == Shapes::Classes).then_some(max_tokens)
    }
}

/// The padded length of a sequence of `n` tokens.
pub fn class_length(n: usize) -> usize {
    let step = match n {
        0..=32 => 4,
        33..=64 => 8,
        65..=128 => 16,
        129..=256 => 32,
        _ => 64,
    };
    n.max(1).div_ceil(step) * step
}

/// Rows of every batch of a class of `length` under a budget of `max_tokens`.
pub fn class_rows(length: usize, max_tokens: usize) -> usize {
    (max_tokens / length).max(1)
}

/// The shape class of a pair: its longer side with the token it gains, padded.
fn pair_class(src_len: usize, tgt_len: usize) -> usize {
    class_length((src_len + 1).max(tgt_len + 1))
}

/// A batch's padded shape, `(rows, length)`.
pub fn batch_shape(
    src_lens: impl Fn(usize) -> usize,
    tgt_lens: impl Fn(usize) -> usize,
    batch: &Batch,
    max_tokens: usize,
) -> (usize, usize) {
    let length = batch
        .iter()
        .map(|&i| pair_class(src_lens(i), tgt_lens(i)))
        .max()
        .unwrap_or(8);
    (class_rows(length, max_tokens).max(batch.len()), length)
}

/// Batches in shape classes: pairs grouped by class (then by target and source length,
/// so each batch holds similar pairs), each class cut into batches of its row count; the
/// pairs left over from a class (too few for a full batch) join the next longer class, so
/// few batches have padding rows. Deterministic, and every pair is in exactly one batch.
pub fn make_class_batches(src_lens: &[usize], tgt_lens: &[usize], max_tokens: usize) -> Vec<Batch> {
    let mut order: Vec<usize> = (0..src_lens.len()).collect();
    let class = |i: usize| pair_class(src_lens[i], tgt_lens[i]);
    order.sort_by_key(|&i| (class(i), tgt_lens[i], src_lens[i], i));
    let mut batches: Vec<Batch> = Vec::new();
    let mut carried: Batch = Vec::new();
    let mut start = 0;
    while start < order.len() {
        let length = class(order[start]);
        let end = start + order[start..].partition_point(|&i| class(i) == length);
        let rows = class_rows(length, max_tokens);
        let mut members = std::mem::take(&mut carried);
        members.extend_from_slice(&order[start..end]);
        let full = members.len() / rows * rows;
        batches.extend(members[..full].chunks(rows).map(<[usize]>::to_vec));
        carried = members[full..].to_vec();
        start = end;
    }
    if !carried.is_empty() {
        batches.push(carried);
    }
    batches
}

/// How a set of batches pads: distinct shapes, target tokens (EOS included) and padded
/// target positions (rows × longest decoder sequence, or the class shape).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Padding {
    pub batches: usize,
    pub shapes: usize,
    pub target_tokens: usize,
    pub target_positions: usize,
}

impl Padding {
    pub fn of(
        batches: &[Batch],
        src_lens: &[usize],
        tgt_lens: &[usize],
        classes: Option<usize>,
    ) -> Padding {
        let mut shapes = std::collections::HashSet::new();
        let (mut tokens, mut positions) = (0, 0);
        for b in batches {
            let real: usize = b.iter().map(|&i| tgt_lens[i] + 1).sum();
            let shape = match classes {
                Some(budget) => {
                    let (rows, len) = batch_shape(|i| src_lens[i], |i| tgt_lens[i], b, budget);
                    (rows, len, len)
                }
                None => (
                    b.len(),
                    b.iter().map(|&i| src_lens[i]).max().unwrap_or(0),
                    b.iter().map(|&i| tgt_lens[i] + 1).max().unwrap_or(0),
                ),
            };
            shapes.insert(shape);
            tokens += real;
            positions += shape.0 * shape.2;
        }
        Padding {
            batches: batches.len(),
            shapes: shapes.len(),
            target_tokens: tokens,
            target_positions: positions,
        }
    }
}

impl std::fmt::Display for Padding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} batches in {} shapes; target tokens fill {:.1}% of the padded target positions",
            self.batches,
            self.shapes,
            100.0 * self.target_tokens as f64 / self.target_positions.max(1) as f64
        )
    }
}

/// Pads a batch's token rows to `(rows, length)`: every row to `length` with PAD, and
/// extra rows whose source is a lone EOS, whose decoder input is a lone BOS and whose
/// targets are all PAD, so they attend to something (no all-masked softmax) and add
/// nothing to the loss.
pub fn pad_to_shape(forced: TeacherForced, (rows, length): (usize, usize)) -> TeacherForced {
    let TeacherForced {
        sources: mut src,
        inputs: mut tgt_in,
        outputs: mut tgt_out,
    } = forced;
    while src.len() < rows {
        src.push(vec![EOS]);
        tgt_in.push(vec![BOS]);
        tgt_out.push(vec![PAD]);
    }
    for side in [&mut src, &mut tgt_in, &mut tgt_out] {
        for row in side.iter_mut() {
            row.resize(row.len().max(length), PAD);
        }
    }
    TeacherForced {
        sources: src,
        inputs: tgt_in,
        outputs: tgt_out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use std::collections::BTreeSet;

    #[test]
    fn lengths_round_up_to_their_class() {
        let cases = [
            (1, 4),
            (8, 8),
            (9, 12),
            (33, 40),
            (64, 64),
            (65, 80),
            (129, 160),
            (257, 320),
        ];
        for (n, want) in cases {
            assert_eq!(class_length(n), want, "{n}");
        }
        assert_eq!(class_rows(48, 4096), 85);
        assert_eq!(class_rows(5000, 4096), 1);
    }

    /// Every pair in one batch, every batch within its class's rows and the budget, and
    /// few shapes: at most one per class of 8 tokens however many pairs there are.
    #[test]
    fn class_batches_cover_every_pair_in_few_shapes() {
        let mut rng = Rng::new(5);
        let n = 20_000;
        let src: Vec<usize> = (0..n).map(|_| 1 + rng.below(60) as usize).collect();
        let tgt: Vec<usize> = src
            .iter()
            .map(|&s| (s + rng.below(9) as usize).saturating_sub(4).max(1))
            .collect();
        let budget = 4096;
        let batches = make_class_batches(&src, &tgt, budget);
        let mut seen = vec![0u8; n];
        let mut shapes = BTreeSet::new();
        let (mut real, mut padded) = (0usize, 0usize);
        for b in &batches {
            let (rows, length) = batch_shape(|i| src[i], |i| tgt[i], b, budget);
            assert!(
                b.len() <= rows && rows * length <= budget,
                "{rows} × {length}"
            );
            for &i in b {
                seen[i] += 1;
                assert!(src[i] < length && tgt[i] < length);
                real += tgt[i] + 1;
            }
            padded += rows * length;
            shapes.insert((rows, length));
        }
        assert!(seen.iter().all(|&c| c == 1));
        // Lengths up to 69 tokens: classes 4, 8, …, 32, 40, …, 72.
        assert!(shapes.len() <= 13, "{shapes:?}");
        // The exact bucketing of the same pairs has a shape per batch, near enough.
        let exact = crate::data::batch::make_batches(&src, &tgt, budget);
        let exact_shapes: BTreeSet<(usize, usize, usize)> = exact
            .iter()
            .map(|b| {
                let s = b.iter().map(|&i| src[i]).max().unwrap();
                let t = b.iter().map(|&i| tgt[i]).max().unwrap();
                (b.len(), s, t)
            })
            .collect();
        assert!(
            exact_shapes.len() > 5 * shapes.len(),
            "{}",
            exact_shapes.len()
        );
        // Few batches are short of their class's rows: leftovers move up a class (a short
        // batch remains only where a class's leftovers outnumber the next class's rows).
        let short = batches
            .iter()
            .filter(|b| b.len() < batch_shape(|i| src[i], |i| tgt[i], b, budget).0)
            .count();
        assert!(
            short < shapes.len(),
            "{short} short batches in {} shapes",
            shapes.len()
        );
        // Target tokens are at least 40% of the padded target positions.
        assert!(real as f64 / padded as f64 > 0.4, "{real} / {padded}");
    }

    #[test]
    fn padding_rows_carry_no_target() {
        let tf = TeacherForced {
            sources: vec![vec![5, 6, EOS]],
            inputs: vec![vec![BOS, 7]],
            outputs: vec![vec![7, EOS]],
        };
        let TeacherForced {
            sources: src,
            inputs: tgt_in,
            outputs: tgt_out,
        } = pad_to_shape(tf, (3, 8));
        assert_eq!(src.len(), 3);
        assert!(
            src.iter()
                .chain(&tgt_in)
                .chain(&tgt_out)
                .all(|r| r.len() == 8)
        );
        assert_eq!(&src[0][..4], &[5, 6, EOS, PAD]);
        assert_eq!(src[2][0], EOS);
        assert_eq!(tgt_in[2][0], BOS);
        assert!(tgt_out[1].iter().all(|&t| t == PAD));
    }
}
