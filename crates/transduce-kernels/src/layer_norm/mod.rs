//! Layer normalization (§3.1, "LayerNorm(x + Sublayer(x))") as one kernel forward and one
//! backward, on the cubecl backends (wgpu, CUDA).
//!
//! burn has no layer-norm kernel: its `layer_norm` is a default body of primitives (two
//! mean reductions, a centring, a square root, a division, the scale and the shift), and
//! under autodiff each primitive records its own backward. On a GPU a training step is
//! host-bound, and those primitives are some 20 launches per norm forward and backward.
//! Here the forward is one kernel; the backward is one kernel for the input's gradient
//! (with `dy·x̂` and `dy` written side by side) and one column sum for γ's and β's gradients.
//!
//! The oracle is burn's own `LayerNorm` (the model's unfused path, `transduce::ops`); the sums run in another order, so the two agree to rounding, not bit for
//! bit. Native only: the browser's CPU module carries no cubecl.

mod backward;
mod dispatch;
mod forward;
mod kernel;
#[cfg(test)]
mod tests;

pub use dispatch::try_layer_norm;
pub use forward::LayerNormKernel;
