//! The label-smoothed cross-entropy (§5.4) of each row of logits, with its gradient, as one
//! cubecl kernel (wgpu, CUDA): a workgroup per row passes over the vocabulary three times
//! (maximum; sum of exponentials and of logits; p − q), where the same formulas as tensor
//! operations (the model's unfused path, `transduce::train::loss`; [`reference`] here, the
//! oracle) launch a dozen kernels and keep several `[rows, vocabulary]` tensors (the step's
//! largest) in memory.
//!
//! There is no backward: the kernel writes the gradient `p − q` with the loss, and the model
//! feeds it to autodiff through a surrogate (`transduce::train::loss::label_smoothed`). Its
//! tests here are against [`reference`] in f32, f16 and bf16; the model's, beside its own
//! paths, against the loss's definition differentiated by autodiff.

mod dispatch;
mod forward;
mod kernel;
pub mod reference;
#[cfg(test)]
mod tests;

pub use dispatch::smoothed_cross_entropy;
pub use forward::LossKernel;
