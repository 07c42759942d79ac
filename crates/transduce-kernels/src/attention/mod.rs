//! Scaled dot-product attention over all heads (§3.2.1, §3.2.2) as one kernel forward and
//! two backward, for training on the cubecl backends (wgpu, CUDA).
//!
//! As burn primitives a multi-head attention splits its queries, keys and values into
//! heads (copies: a matrix product takes no permuted batch), multiplies, scales, masks,
//! takes the softmax, multiplies again and merges the heads (another copy); its backward
//! copies and multiplies as many times again: about 25 launches per attention and step.
//! These kernels read the heads where the projections wrote them (`[batch, length, heads ×
//! d]`) and write their results there, so nothing is copied:
//! - forward: one workgroup per (batch, head, query) computes the scores, the softmax
//!   (kept for the backward) and the weighted values;
//! - backward, per query: dP = dO·Vᵀ, dS = P ⊙ (dP − Σ P ⊙ dP)/√d_k (0 where blocked),
//!   dQ = dS·K;
//! - backward, per key: dK = dSᵀ·Q, dV = Pᵀ·dO.
//!
//! The loops are plain (no tiles): at the lengths of translation (tens of tokens) a
//! workgroup per row has enough to do, and what the step pays for is launches. The oracle
//! is burn's primitives ([`reference`] here, `transduce::attention::scaled_dot_product` in
//! the model). Native only.

mod backward;
mod dispatch;
mod forward;
mod kernel;
pub mod reference;
#[cfg(test)]
mod tests;

pub use dispatch::try_attention;
pub use forward::AttentionKernel;

/// Threads per workgroup (one row of scores, or one key's gradients).
pub(crate) const THREADS: usize = 64;
/// The most keys a row may have (the scores stay in workgroup memory: 4 KiB).
pub const MAX_KEYS: usize = 1024;
/// The score of a blocked position, as the primitives' `mask_fill`.
pub(crate) const BLOCKED: f32 = -1.0e9;
