//! One optimizer step (§5.3), however it is taken:
//! - [`eager`]: forward, backward and burn's Adam, op by op (the CPU, `--devices`,
//!   `--eager`);
//! - [`replay`]: the same step captured once per batch shape and replayed with one call,
//!   its scalars in device buffers; [`accum`] does the same for a step of several batches,
//!   and [`ranks`] for a rank's share of a data-parallel step, the ranks' gradients summed
//!   between the last gradient replay and the update's;
//! - [`adam`]: the device-scalar Adam replayed steps update with, [`record`] its checkpoint
//!   format (burn's, so either kind of run resumes the other's), [`params`] the walks over
//!   the model's parameters it needs;
//! - [`loss_scale`]: half precision's dynamic loss scale;
//!
//! The cubecl kernels the steps launch (Adam with the finite check and the accumulation,
//! dropout's masks drawn on the device) are in `transduce-kernels`.
//!
//! The run around the steps (the loop, checkpoints, validation, metrics) is
//! [`crate::train::run`].

pub mod accum;
pub mod adam;
pub mod eager;
pub mod gradient_buffer;
pub mod loss_scale;
pub mod params;
pub mod ranks;
pub mod record;
pub mod replay;
