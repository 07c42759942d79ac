//! The trainer's randomness: SplitMix64 (from the model crate) and per-step seeds.

pub use transduce::rng::Rng;

/// A seed for step `step` of a run seeded with `seed`: the dropout masks of a step depend
/// on nothing else, so resuming reproduces them.
pub fn step_seed(seed: u64, step: u64) -> u64 {
    Rng::new(seed ^ step.wrapping_mul(0xD1B5_4A32_D192_ED03)).next_u64()
}
