//! # transduce-kernels
//!
//! The fused cubecl kernels the trainer's step runs on burn's GPU backends (wgpu, CUDA), one
//! folder per family, each split the same way:
//! - `kernel.rs`: the `#[cube]` kernels;
//! - `forward.rs`: the backend trait (burn's `backend_extension`) and its cubecl
//!   implementation, which launches them;
//! - `backward.rs`: the autodiff implementation, which records the backward;
//! - `dispatch.rs`: the entry point on burn's tensors, `None` where the kernels do not apply
//!   (the caller runs burn's primitives);
//! - `reference.rs`: the unfused oracle as burn's primitives, where the crate needs its own
//!   (layer norm's is burn's `LayerNorm` itself);
//! - `tests.rs`: the kernels against their unfused oracle in f32, f16 and bf16 (each type
//!   the adapter lacks skipped, and said).
//!
//! Families: [`attention`] (scaled dot-product attention over all heads), [`layer_norm`],
//! [`loss`] (the label-smoothed cross-entropy with its gradient), [`adam`] (the multi-tensor
//! update, with the finite check and the accumulation) and [`dropout`] (masks drawn on the
//! device). A family without a backward (the loss, Adam, dropout) has no `backward.rs`.
//! `transduce bench kernels` times each family against its oracle and counts the launches
//! (the role of llm.c's `dev/cuda`).
//! The row reductions they share are written once ([`reduce`]); the kernels' scalar and type
//! arguments are in [`args`]; [`device`] says which devices they run on; [`testing`] holds
//! what the GPU tests of every crate share (the serial lock, launch counting
//! ([`launches`]), the wgpu device, closeness).
//!
//! Whether the fused kernels are used at all is the caller's choice (the model crate's
//! `ops` module): nothing here reads a switch. Native only: the browser's CPU module
//! carries no cubecl.

pub mod adam;
#[cfg(feature = "cuda")]
pub mod address;
pub mod args;
pub mod attention;
pub mod device;
pub mod dropout;
pub mod launches;
pub mod layer_norm;
pub mod loss;
pub mod reduce;
pub mod testing;
