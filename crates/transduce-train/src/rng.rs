//! The trainer's randomness: SplitMix64 (from the model crate) and per-step seeds, for
//! the data's shuffles and batches and the engine's dropout masks alike.

pub use transduce::rng::Rng;

/// A seed for step `step` of a run seeded with `seed`: the dropout masks of a step depend
/// on nothing else, so resuming reproduces them.
pub fn step_seed(seed: u64, step: u64) -> u64 {
    Rng::new(seed ^ step.wrapping_mul(0xD1B5_4A32_D192_ED03)).next_u64()
}

/// The dropout seed of batch `j` of a step's group (0-based, in the group's order), from
/// the step's [`step_seed`]: the batch draws the same masks on whichever device or rank
/// takes it, so `--accum N` and N ranks train alike.
pub fn batch_seed(step_seed: u64, j: usize) -> u64 {
    Rng::new(step_seed ^ (j as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)).next_u64()
}
