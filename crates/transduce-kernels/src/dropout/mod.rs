//! Dropout masks (§5.4) drawn on the device from a step count in device memory, for steps
//! captured as graphs.
//!
//! burn's random kernels take their seed from the host as a kernel argument: a replayed
//! graph would draw the capture's mask on every step, silently. Here each mask element is a
//! counter-based hash of (run seed, step, dropout site, element index) with the step read
//! from the device counter the optimizer advances, so every replay draws new masks, and a
//! resumed run draws the masks an uninterrupted one would (they depend on nothing else).

mod dispatch;
mod forward;
mod kernel;
#[cfg(test)]
mod tests;

pub use dispatch::step_masks;
pub use forward::DropoutMask;
