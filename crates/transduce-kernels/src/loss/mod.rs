//! The label-smoothed cross-entropy (§5.4) of each row of logits, with its gradient, as one
//! cubecl kernel (wgpu, CUDA): a workgroup per row passes over the vocabulary three times
//! (maximum; sum of exponentials and of logits; p − q), where the same formulas as tensor
//! operations (the model's `transduce::train::loss`, `on_device`: this kernel's oracle) launch a dozen kernels
//! and keep several `[rows, vocabulary]` tensors (the step's largest) in memory.
//!
//! There is no backward: the kernel writes the gradient `p − q` with the loss, and the model
//! feeds it to autodiff through a surrogate (`transduce::train::loss::label_smoothed`). Its
//! tests are the model's, against the same formulas as tensor operations.

mod dispatch;
mod forward;
mod kernel;

pub use dispatch::smoothed_cross_entropy;
pub use forward::LossKernel;
