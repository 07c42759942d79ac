//! The switch of the fused kernels ([`crate::layer_norm_kernel`],
//! [`crate::attention_kernel`], and the trainer's loss kernel): on by default; off, they run
//! as burn's primitives, to compare (`transduce bench --no-fused-layers`).

use std::sync::atomic::{AtomicBool, Ordering};

static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turns the fused kernels on or off for the whole process.
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Whether the fused kernels are on ([`set_enabled`]).
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}
