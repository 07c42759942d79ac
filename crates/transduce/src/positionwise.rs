//! Position-wise linear maps: the projections of §3.2.2 and the feed-forward layers of
//! §3.3 apply the same matrices at every position, so a `[b, t, d]` input is one
//! `[b·t, d]` matrix product.
//!
//! Written out because burn's `linear` keeps a 3-D input as a batched product (one
//! `[t, d]` block per sentence) whenever merging the blocks does not make the output
//! squarer, which for sentence-sized `t` it rarely does; on the CPU backend each block
//! then re-packs the weight matrix, and those products took ~45% of a `small` training
//! step (`perf`, docs/BENCHMARKS.md).

use burn::prelude::*;

/// `f` applied to the positions of `x` `[b, t, d]` as the rows of one `[b·t, d]` matrix.
pub fn positionwise(x: Tensor<3>, f: impl FnOnce(Tensor<2>) -> Tensor<2>) -> Tensor<3> {
    let [b, t, d] = x.dims();
    let y = f(x.reshape([b * t, d]));
    let out = y.dims()[1];
    y.reshape([b, t, out])
}
