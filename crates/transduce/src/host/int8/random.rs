//! Random values for the kernels' comparisons (the tests and the relaxed kernel's check).

/// `len` values in −spread..spread from a linear congruential generator: the random
/// products the tests and the relaxed kernel's self-check compare kernels on.
pub fn random(len: usize, state: &mut u64, spread: f32) -> Vec<f32> {
    (0..len)
        .map(|_| {
            *state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((*state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * spread
        })
        .collect()
}
