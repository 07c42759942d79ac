//! The training step's parts that do not depend on files or threads, for the native trainer
//! (`transduce-train`) and the browser alike: the label-smoothed loss (§5.4), the
//! learning-rate schedule and Adam (§5.3), and adaptation, a few steps of fine-tuning on a
//! user's own sentence pairs ([`adapt`]).
//!
//! Natively always built; in wasm only with the `train` feature (burn's autodiff and
//! optimizers), so the browser's translating module carries none of it.

pub mod adapt;
pub mod loss;
pub mod schedule;

use burn::optim::{AdamConfig, ModuleOptimizer};

use crate::tokenizer::{BOS, EOS};

/// A batch's token rows as teacher forcing feeds them (§5): one row per pair on each side.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TeacherForced {
    /// The sources, as the encoder reads them.
    pub sources: Vec<Vec<u32>>,
    /// The decoder's inputs: BOS + target.
    pub inputs: Vec<Vec<u32>>,
    /// What the decoder must predict at each position: target + EOS.
    pub outputs: Vec<Vec<u32>>,
}

/// The token ids a batch of (source, target) pairs trains on (§5: teacher forcing): the
/// sources, BOS + target as the decoder's input, target + EOS as what it must predict.
pub fn teacher_forced<'a>(
    pairs: impl IntoIterator<Item = (&'a [u32], &'a [u32])>,
) -> TeacherForced {
    let mut forced: TeacherForced = Default::default();
    for (src, tgt) in pairs {
        forced.sources.push(src.to_vec());
        forced
            .inputs
            .push(std::iter::once(BOS).chain(tgt.iter().copied()).collect());
        forced
            .outputs
            .push(tgt.iter().copied().chain(std::iter::once(EOS)).collect());
    }
    forced
}

/// Adam as §5.3 sets it: β1 0.9, β2 0.98, ε 10⁻⁹.
pub fn adam() -> ModuleOptimizer {
    AdamConfig::new()
        .with_beta_1(0.9)
        .with_beta_2(0.98)
        .with_epsilon(1e-9)
        .init()
}
