//! The relaxed-SIMD kernel, registered from JavaScript (the `transduce-relaxed` module): which
//! one the matrices made from now on use.

use std::cell::Cell;

/// The relaxed-SIMD dot product kernel (the `transduce-relaxed` module's `dot`, called
/// through JavaScript): `sums[i][j] = Σ_g Σ_t w[g][j][t]·x[i][4g + t]` for `m` rows and
/// `n_padded` columns, `w` int8 `[groups][n_padded][4]`, `x` unsigned 7-bit `[m][4·groups]`.
pub type RelaxedDot =
    unsafe fn(w: *const i8, x: *const i8, sums: *mut i32, m: usize, groups: usize, n_padded: usize);

thread_local! {
    pub(super) static RELAXED: Cell<Option<RelaxedDot>> = const { Cell::new(None) };
}

/// The registered kernel, if any.
pub fn relaxed() -> Option<RelaxedDot> {
    RELAXED.get()
}

/// Whether matrices made now use the relaxed-SIMD kernel.
pub fn relaxed_dot_active() -> bool {
    relaxed().is_some()
}
