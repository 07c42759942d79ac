//! Adam's update (§5.3) as one kernel per [`GROUP`] parameters (a multi-tensor update, as
//! PyTorch's fused Adam), writing each parameter and its two moments in place.
//!
//! As tensor operations ([`reference`]: the trainer's `DeviceAdam` by operations, the oracle) an update is a fused
//! kernel writing new buffers, then three copies back into the buffers a replayed graph
//! reads: four kernels per parameter, three of them copies. This kernel reads the gradients
//! and the step's scalars and rewrites the buffers where they are: one kernel for four
//! parameters, and a replay stays a fixed point by construction. It computes burn's
//! formulas in burn's order.
//!
//! Under a loss scale (half precision) the scalars also carry 1/scale and whether every
//! gradient of the step was finite: the kernel unscales the gradient as it reads it, and
//! on a step that overflowed writes nothing, so the skip happens on the device.
//!
//! Beside it, two group kernels of the same shape: the check that every gradient of a step
//! is finite (half precision skips the update on the device where one is not), and the
//! accumulation of a step's batches' gradients (`--accum` under graphs). No backward:
//! nothing here is differentiated.

mod forward;
mod kernel;
pub mod reference;
#[cfg(test)]
mod tests;

pub use forward::AdamKernel;

/// β1, β2 and ε of §5.3 (the kernel's constants; the trainer's `DeviceAdam` uses the same).
pub const BETA_1: f64 = 0.9;
pub const BETA_2: f64 = 0.98;
pub const EPSILON: f64 = 1e-9;

/// Parameters per [`AdamKernel::adam_group_in_place`]: four tensors each, seventeen
/// buffers a launch with the scalars, within every cubecl backend's bindings (Metal's 31).
pub const GROUP: usize = 4;
