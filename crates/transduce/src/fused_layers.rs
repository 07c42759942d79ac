//! The switch of the fused layer kernels ([`crate::layer_norm_kernel`],
//! [`crate::attention_kernel`]): on by default; off, the layers run as burn's primitives,
//! to compare (`transduce bench --no-fused-layers`).

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
