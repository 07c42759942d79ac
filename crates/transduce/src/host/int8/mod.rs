//! int8 products for the host decoder: weights quantized per output column, activations
//! per row on the fly, int8 × int8 summed exactly in int32, then scaled back to f32.
//!
//! `y[i, j] = sx[i]·sw[j]·Σₖ qx[i, k]·qw[k, j] + b[j]` with `qx = round(x / sx)`,
//! `sx = max|x[i, ·]| / 63` (symmetric, per row on the fly, as CTranslate2 and intgemm
//! quantize activations, in 7 bits), and `qw`, `sw` per output column of the weight (per
//! row of the bundle's `[out, in]` tensor) with `sw = max|w| / 127`. Weights stay in
//! −127..=127 and activations in −63..=63, so every kernel's sum is exact: the kernels
//! differ in speed only, and native and wasm builds give the same bits.
//!
//! Why 7-bit activations: the browser's fastest int8 product, relaxed-SIMD's
//! `i32x4.relaxed_dot_i8x16_i7x16_add_s`, is deterministic only when one operand is 7-bit
//! (`qx + 64` here), and every build must compute alike. Measured (docs/RESULTS.md, "7-bit
//! activations"): at most 0.25 BLEU on any val against f32 arithmetic, and 2.1–3.2× the
//! SIMD128 kernel's speed in Chromium (docs/BENCHMARKS.md, "Relaxed SIMD").
//!
//! Kernels, chosen at run time where the CPU varies:
//! - x86-64 with AVX-512 VNNI: `vpdpbusd` (64 multiply-adds an instruction) on unsigned
//!   activations `qx + 128`, the `128·Σₖ qw[k, j]` this adds taken off per column;
//! - x86-64 with AVX2: `vpmaddubsw` on unsigned activations `qx + 64` (at most 2·127·127
//!   per pair, inside i16), widened by `vpmaddwd`, `64·Σₖ qw[k, j]` taken off per column;
//! - wasm32 where the browser has relaxed SIMD: the `transduce-relaxed` module's kernel
//!   ([`use_relaxed_dot`]) on `qx + 64`, `64·Σₖ qw[k, j]` taken off per column;
//! - wasm32 (built with SIMD128) otherwise: `i32x4.dot_i16x8_s` over weights kept widened
//!   to i16;
//! - elsewhere, plain loops.
//!
//! The files: [`quantize`] (rows to int8 and their scales), [`matrix`] (a weight matrix in
//! the kernels' packed layout), [`product`] (the products, choosing a kernel), and one file
//! per target's kernels: [`portable`], `x86` (AVX-512 VNNI, AVX2) and `wasm` (SIMD128 and
//! the relaxed-SIMD kernel, registered through `relaxed` and checked by `self_check`).

pub mod matrix;
pub mod portable;
pub mod product;
pub mod quantize;
#[cfg(any(test, target_arch = "wasm32"))]
mod random;
#[cfg(target_arch = "wasm32")]
mod relaxed;
#[cfg(target_arch = "wasm32")]
mod self_check;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "wasm32")]
mod wasm;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use matrix::Int8Matrix;
pub use product::WIDE_TILE;
pub use quantize::{
    QMAX, QMAX_ACTIVATION, quantize_activations, quantize_row, quantize_row_on, quantize_rows,
    quantize_rows_on,
};
#[cfg(target_arch = "wasm32")]
pub use relaxed::{RelaxedDot, relaxed_dot_active};
#[cfg(target_arch = "wasm32")]
pub use self_check::use_relaxed_dot;
