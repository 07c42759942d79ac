//! The host decoder's row-wise arithmetic over plain `f32` slices — dot products, layer
//! normalization, softmax, log-softmax, maxima — written so the compiler vectorizes it.
//!
//! Sums use eight independent accumulators: a single running sum is a dependency chain the
//! compiler may not reorder (floating-point addition is not associative), eight are eight
//! SIMD lanes.

const LANES: usize = 8;

/// Σ aᵢ·bᵢ.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; LANES];
    let (ca, ra) = a.split_at(n - n % LANES);
    let (cb, rb) = b.split_at(n - n % LANES);
    for (x, y) in ca.chunks_exact(LANES).zip(cb.chunks_exact(LANES)) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    let tail: f32 = ra.iter().zip(rb).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + tail
}

/// y += a·x.
#[inline]
pub fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += a * x;
    }
}

#[inline]
fn sum(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let (chunks, rest) = x.split_at(x.len() - x.len() % LANES);
    for c in chunks.chunks_exact(LANES) {
        for i in 0..LANES {
            acc[i] += c[i];
        }
    }
    acc.iter().sum::<f32>() + rest.iter().sum::<f32>()
}

/// The larger of `a` and `b` by one comparison (`a` when `b` is NaN). Not `f32::max`,
/// whose NaN rule has no single instruction in wasm: there it is a call to `fmaxf` per
/// element (15% of a beam-search step in the browser before this); this is
/// `f32x4.pmax` in wasm and `maxps` on x86, and vectorizes on both.
#[inline(always)]
pub fn larger(a: f32, b: f32) -> f32 {
    if b > a { b } else { a }
}

/// The largest value of `x` (−∞ if empty), over [`LANES`] running maxima so the loop
/// vectorizes.
#[inline(always)]
pub fn max(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let (chunks, rest) = x.split_at(x.len() - x.len() % LANES);
    for c in chunks.chunks_exact(LANES) {
        for i in 0..LANES {
            acc[i] = larger(acc[i], c[i]);
        }
    }
    rest.iter()
        .chain(&acc)
        .fold(f32::NEG_INFINITY, |m, &v| larger(m, v))
}

/// The largest magnitude in `x` (0 if empty; NaN if any value is NaN is not promised:
/// callers check finiteness of the result).
#[inline]
pub fn max_abs(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let (chunks, rest) = x.split_at(x.len() - x.len() % LANES);
    for c in chunks.chunks_exact(LANES) {
        for i in 0..LANES {
            acc[i] = larger(acc[i], c[i].abs());
        }
    }
    rest.iter().map(|v| v.abs()).chain(acc).fold(0.0, larger)
}

/// LayerNorm over each row of `x` `[.., d]` in place (ε = 10⁻⁵, burn's default; the
/// variance is the biased one, as in Ba et al. 2016).
pub fn layer_norm(x: &mut [f32], gamma: &[f32], beta: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if super::isa::avx2() {
        // SAFETY: the CPU has AVX2 (just checked); the same code, the same bits (see
        // `log_softmax_shift`).
        return unsafe { layer_norm_avx2(x, gamma, beta) };
    }
    layer_norm_lanes(x, gamma, beta)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn layer_norm_avx2(x: &mut [f32], gamma: &[f32], beta: &[f32]) {
    layer_norm_lanes(x, gamma, beta)
}

#[inline(always)]
fn layer_norm_lanes(x: &mut [f32], gamma: &[f32], beta: &[f32]) {
    const EPSILON: f32 = 1e-5;
    let d = gamma.len();
    for row in x.chunks_exact_mut(d) {
        let mean = sum(row) / d as f32;
        let mut acc = [0.0f32; LANES];
        let (chunks, rest) = row.split_at(d - d % LANES);
        for c in chunks.chunks_exact(LANES) {
            for i in 0..LANES {
                let c = c[i] - mean;
                acc[i] += c * c;
            }
        }
        let var = (acc.iter().sum::<f32>()
            + rest.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>())
            / d as f32;
        let scale = 1.0 / (var + EPSILON).sqrt();
        for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
            *v = (*v - mean) * scale * g + b;
        }
    }
}

/// Softmax of one row in place.
#[inline]
pub fn softmax(row: &mut [f32]) {
    let m = max(row);
    for v in row.iter_mut() {
        *v = exp(*v - m);
    }
    let total = sum(row);
    for v in row.iter_mut() {
        *v /= total;
    }
}

/// log-softmax of one row in place: x − max − log Σ e^(x − max).
pub fn log_softmax(row: &mut [f32]) {
    let shift = log_softmax_shift(row);
    for v in row.iter_mut() {
        *v -= shift;
    }
}

/// The shift s with log-softmax(x)ᵢ = xᵢ − s: max + log Σ e^(x − max). A search that only
/// ranks a row, or reads a few of its entries, subtracts it where it reads instead of
/// writing the whole row.
///
/// On x86-64 the same code runs compiled for the CPU's widest vectors (the crate's
/// baseline is SSE2): AVX-512 takes sixteen exponentials per instruction, AVX2 eight. The
/// lanes and the order of the sums are the code's, not the instruction set's, and Rust
/// does not fuse multiplies and adds, so every path gives the same bits.
pub fn log_softmax_shift(row: &[f32]) -> f32 {
    log_softmax_shift_from_max(row, max(row))
}

/// x·σ(x) in place, vectorized: σ from e^(−|x|) ≤ 1 ([`exp`]), so no exponential
/// overflows and the loop has no call.
pub fn swish(x: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if super::isa::avx512() {
            // SAFETY: the CPU has AVX-512 F (just checked).
            return unsafe { swish_avx512(x) };
        }
        if super::isa::avx2() {
            // SAFETY: the CPU has AVX2 (just checked).
            return unsafe { swish_avx2(x) };
        }
    }
    swish_lanes(x)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn swish_avx512(x: &mut [f32]) {
    swish_lanes(x)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn swish_avx2(x: &mut [f32]) {
    swish_lanes(x)
}

#[inline(always)]
fn swish_lanes(x: &mut [f32]) {
    for v in x.iter_mut() {
        let e = exp(-v.abs());
        let s = if *v >= 0.0 {
            1.0 / (1.0 + e)
        } else {
            e / (1.0 + e)
        };
        *v *= s;
    }
}

/// [`log_softmax_shift`] of a row whose maximum `m` (`max(row)`) is known: the
/// exponentials' pass alone, so a search that found the maximum while ranking the row
/// reads it once more, not twice.
pub fn log_softmax_shift_from_max(row: &[f32], m: f32) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if super::isa::avx512() {
            // SAFETY: the CPU has AVX-512 F (just checked).
            return unsafe { shift_avx512(row, m) };
        }
        if super::isa::avx2() {
            // SAFETY: the CPU has AVX2 (just checked).
            return unsafe { shift_avx2(row, m) };
        }
    }
    shift_lanes(row, m)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn shift_avx512(row: &[f32], m: f32) -> f32 {
    shift_lanes(row, m)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn shift_avx2(row: &[f32], m: f32) -> f32 {
    shift_lanes(row, m)
}

/// Σ e^(x − m) over [`LANES`] running sums, lane i summing the entries ≡ i mod LANES in
/// order; two blocks of lanes' exponentials are computed at once (one AVX-512 register),
/// then added block by block: the same sums, in the same order, as one block at a time.
#[inline(always)]
fn shift_lanes(row: &[f32], m: f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let (chunks, rest) = row.split_at(row.len() - row.len() % LANES);
    let mut pairs = chunks.chunks_exact(2 * LANES);
    for c in &mut pairs {
        let mut e = [0.0f32; 2 * LANES];
        for i in 0..2 * LANES {
            e[i] = exp(c[i] - m);
        }
        for i in 0..LANES {
            acc[i] += e[i];
        }
        for i in 0..LANES {
            acc[i] += e[LANES + i];
        }
    }
    for c in pairs.remainder().chunks_exact(LANES) {
        for i in 0..LANES {
            acc[i] += exp(c[i] - m);
        }
    }
    let total = acc.iter().sum::<f32>() + rest.iter().map(|&v| exp(v - m)).sum::<f32>();
    m + total.ln()
}

/// One ranking pass over a row of logits: returns the row's maximum (the value [`max`]
/// gives) and leaves in `out` its `n` largest values with their ids, largest first, the
/// smaller id first among equal values. Ids in `banned`, −∞ and NaN are passed over. Once
/// the list is full, a chunk whose maximum cannot enter it costs that one comparison, so
/// the pass costs about what [`max`] costs: the search's ranking and the softmax's maximum
/// in one read of the row instead of two.
///
/// Compiled for AVX-512 and AVX2 where the CPU has them (the chunks' maxima in wider
/// lanes; a maximum is exact, so every path gives the same list).
pub fn max_and_largest(row: &[f32], n: usize, banned: &[u32], out: &mut Vec<(f32, u32)>) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if super::isa::avx512() {
            // SAFETY: the CPU has AVX-512 F (just checked).
            return unsafe { max_and_largest_avx512(row, n, banned, out) };
        }
        if super::isa::avx2() {
            // SAFETY: the CPU has AVX2 (just checked).
            return unsafe { max_and_largest_avx2(row, n, banned, out) };
        }
    }
    max_and_largest_lanes(row, n, banned, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn max_and_largest_avx512(row: &[f32], n: usize, banned: &[u32], out: &mut Vec<(f32, u32)>) -> f32 {
    max_and_largest_lanes(row, n, banned, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn max_and_largest_avx2(row: &[f32], n: usize, banned: &[u32], out: &mut Vec<(f32, u32)>) -> f32 {
    max_and_largest_lanes(row, n, banned, out)
}

#[inline(always)]
fn max_and_largest_lanes(row: &[f32], n: usize, banned: &[u32], out: &mut Vec<(f32, u32)>) -> f32 {
    // Long enough that the test per chunk costs little, short enough to skip most entries.
    const CHUNK: usize = 32;
    out.clear();
    let mut m = f32::NEG_INFINITY;
    for (c, chunk) in row.chunks(CHUNK).enumerate() {
        let top = max(chunk);
        m = larger(m, top);
        // A later entry equal to the list's worst does not enter: its id is larger.
        if n == 0 || (out.len() == n && top <= out[n - 1].0) || top == f32::NEG_INFINITY {
            continue;
        }
        for (i, &v) in chunk.iter().enumerate() {
            let id = (c * CHUNK + i) as u32;
            if v == f32::NEG_INFINITY || v.is_nan() || (out.len() == n && v <= out[n - 1].0) {
                continue;
            }
            if banned.contains(&id) {
                continue;
            }
            let at = out.partition_point(|&(w, _)| w >= v);
            if out.len() == n {
                out.pop();
            }
            out.insert(at, (v, id));
        }
    }
    m
}

/// e^x for x ≤ 0 in f32 (relative error < 2·10⁻⁷), branch-free so loops over it
/// vectorize: x = n·ln 2 + r with |r| ≤ ln 2 / 2, e^r by Cephes' `expf` polynomial, 2^n
/// through the exponent bits. Inputs below −87 (where e^x is under f32's normal range)
/// give e^−87 ≈ 1.6·10⁻³⁸, which no sum of probabilities can tell from 0.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5 · 2²³: adding it rounds to an integer held in the low mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 0.0);
    let shifted = x * LOG2E + ROUND;
    let n = shifted - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.987_569_1e-4;
    let p = p * r + 1.398_2e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 0.166_666_65;
    let p = p * r + 0.5;
    let e_r = p * r * r + r + 1.0;
    // n is in −126..=0: its bits sit in the low mantissa of `shifted`.
    let n_bits = shifted.to_bits().wrapping_sub(ROUND.to_bits()) as i32;
    // Wrapping: no overflow check (and its branch) in the vectorized loop.
    e_r * f32::from_bits((n_bits.wrapping_add(127) as u32) << 23)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// max_and_largest against sorting the whole row: ties (small integers repeat), −∞,
    /// NaN, banned ids, lists longer than the row.
    #[test]
    fn max_and_largest_is_a_sort() {
        let mut state = 7u64;
        let mut out = Vec::new();
        for len in [1, 5, 31, 32, 33, 100, 2000] {
            for n in [0, 1, 2, 5, 9, 40] {
                let x: Vec<f32> = (0..len)
                    .map(|i| {
                        state = state
                            .wrapping_mul(6_364_136_223_846_793_005)
                            .wrapping_add(1);
                        match (state >> 33) % 50 {
                            0 => f32::NEG_INFINITY,
                            1 if i > 2 => f32::NAN,
                            r => (r % 17) as f32 * 0.25 - 2.0,
                        }
                    })
                    .collect();
                let banned = [0u32, 1];
                let mut want: Vec<(f32, u32)> = x
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| (v, i as u32))
                    .filter(|&(v, i)| v > f32::NEG_INFINITY && !banned.contains(&i))
                    .collect();
                want.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                want.truncate(n);
                let m = max_and_largest(&x, n, &banned, &mut out);
                assert_eq!(out, want, "{len} {n}");
                assert_eq!(m, max(&x), "{len} {n}");
            }
        }
    }

    /// swish against f64's x / (1 + e^−x), both signs, zero and large magnitudes: the
    /// vectorized form stays within a few ulps of the exact value. Below x = −87, where
    /// [`exp`] stops at e^−87, σ(x) reads e^−87 ≈ 1.6·10⁻³⁸: an error under |x|·2·10⁻³⁸.
    #[test]
    fn swish_is_accurate() {
        let mut x: Vec<f32> = (-200_000..=200_000).map(|i| i as f32 / 2000.0).collect();
        x.extend([0.0, -0.0, 1e-30, -1e-30, 1e4, -1e4, f32::MAX, -87.5, -120.0]);
        let mut y = x.clone();
        swish(&mut y);
        for (&x, &y) in x.iter().zip(&y) {
            let exact = x as f64 / (1.0 + (-(x as f64)).exp());
            let tolerance = 5e-7 * exact.abs() + x.abs() as f64 * 2e-38;
            assert!(
                (y as f64 - exact).abs() <= tolerance,
                "swish({x}) = {y}, exact {exact}"
            );
        }
    }

    /// exp against f64's over its whole domain.
    #[test]
    fn exp_is_accurate() {
        let mut worst = 0.0f64;
        for i in 0..=1_000_000 {
            let x = -87.0 * i as f32 / 1_000_000.0;
            let exact = (x as f64).exp();
            worst = worst.max(((exp(x) as f64) - exact).abs() / exact);
        }
        assert!(worst < 2e-7, "relative error {worst}");
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(-1000.0) > 0.0 && exp(-1000.0) < 1e-37);
    }

    /// The shift as it was first written: one block of lanes at a time, in the baseline
    /// build. The oracle of every faster path's bits.
    fn one_block_at_a_time(row: &[f32]) -> f32 {
        let m = max(row);
        let mut acc = [0.0f32; LANES];
        let (chunks, rest) = row.split_at(row.len() - row.len() % LANES);
        for c in chunks.chunks_exact(LANES) {
            for i in 0..LANES {
                acc[i] += exp(c[i] - m);
            }
        }
        let total = acc.iter().sum::<f32>() + rest.iter().map(|&v| exp(v - m)).sum::<f32>();
        m + total.ln()
    }

    /// The log-softmax shift against f64's definition, and its AVX-512 and AVX2 builds
    /// (taken on CPUs that have them) bit for bit against the baseline build.
    #[test]
    fn log_softmax_shift_is_exact_and_the_same_on_every_path() {
        let mut state = 0x9e37_79b9_u32;
        for len in [1, 7, 8, 9, 15, 16, 17, 24, 100, 8000, 58_101] {
            let row: Vec<f32> = (0..len)
                .map(|_| {
                    state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (state >> 8) as f32 / (1 << 24) as f32 * 40.0 - 20.0
                })
                .collect();
            let m = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let want = m + row.iter().map(|&v| (v as f64 - m).exp()).sum::<f64>().ln();
            let found = log_softmax_shift(&row);
            assert!(
                (found as f64 - want).abs() < 1e-5 * want.abs().max(1.0),
                "{len}"
            );
            assert_eq!(
                found.to_bits(),
                one_block_at_a_time(&row).to_bits(),
                "{len}"
            );
            assert_eq!(
                found.to_bits(),
                log_softmax_shift_from_max(&row, max(&row)).to_bits(),
                "{len}"
            );
            assert_eq!(found.to_bits(), shift_lanes(&row, max(&row)).to_bits());
        }
    }

    /// Row operations against their formulas in f64.
    #[test]
    fn row_operations_by_formula() {
        let (k, x): (usize, Vec<f32>) = (19, (0..19).map(|i| i as f32 - 6.0).collect());
        assert_eq!(
            dot(&x[..k], &x[..k]),
            (0..k).map(|l| x[l] * x[l]).sum::<f32>()
        );
        let row: Vec<f32> = (0..37)
            .map(|i| ((i * 17) % 23) as f32 * 0.37 - 4.0)
            .collect();
        let n = row.len() as f64;
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
        let gamma: Vec<f32> = (0..row.len()).map(|i| 1.0 + i as f32 * 0.01).collect();
        let beta: Vec<f32> = (0..row.len()).map(|i| i as f32 * -0.02).collect();
        let mut normed = row.clone();
        layer_norm(&mut normed, &gamma, &beta);
        let big = row.iter().fold(f64::MIN, |m, &v| m.max(v as f64));
        let z: f64 = row.iter().map(|&v| (v as f64 - big).exp()).sum();
        let mut soft = row.clone();
        softmax(&mut soft);
        let mut log_soft = row.clone();
        log_softmax(&mut log_soft);
        for i in 0..row.len() {
            let x = row[i] as f64;
            let ln = (x - mean) / (var + 1e-5).sqrt() * gamma[i] as f64 + beta[i] as f64;
            assert!((normed[i] as f64 - ln).abs() < 1e-5, "layer norm {i}");
            let p = (x - big).exp() / z;
            assert!((soft[i] as f64 - p).abs() < 1e-6, "softmax {i}");
            assert!(
                (log_soft[i] as f64 - p.ln()).abs() < 1e-5,
                "log-softmax {i}"
            );
        }
    }
}
