//! The training step's parts that do not depend on files or threads, for the native trainer
//! (`transduce-train`) and the browser alike: the label-smoothed loss (§5.4), the
//! learning-rate schedule and Adam (§5.3), and adaptation, a few steps of fine-tuning on a
//! user's own sentence pairs ([`adapt`]).
//!
//! Natively always built; in wasm only with the `train` feature (burn's autodiff and
//! optimizers), so the browser's translating module carries none of it.

pub mod adapt;
pub mod loss;
#[cfg(not(target_arch = "wasm32"))]
pub mod loss_kernel;
pub mod schedule;

use burn::optim::{AdamConfig, ModuleOptimizer};

/// Adam as §5.3 sets it: β1 0.9, β2 0.98, ε 10⁻⁹.
pub fn adam() -> ModuleOptimizer {
    AdamConfig::new()
        .with_beta_1(0.9)
        .with_beta_2(0.98)
        .with_epsilon(1e-9)
        .init()
}
