//! The host decoder's int8 product (`host::int8`) on the shapes `compact` decodes with:
//! rows × k × n, microseconds per product and multiply-adds per second, on whichever kernel
//! this CPU selects (AVX-512 VNNI, AVX2 or portable).
//!
//!     cargo run --release -p transduce --example int8_gemm
//!
//! Shapes: a batch of 128 rows (32 sentences × beam 4) through the output projection (192 →
//! 8,000 words), the fused Q/K/V (192 → 576) and the FFN's second layer (768 → 192); one
//! row through the output projection (greedy, one sentence); 32 rows through the FFN's first.
//! Then opus-mt-en-de's (512 wide, FFN 2,048, 58,101 words): 128 rows through the output
//! projection, the fused Q/K/V, the attention's output and both FFN layers; 4 rows (one
//! sentence, beam 4) through the output projection and both FFN layers; 1, 8, 16 and 32 rows
//! through the output projection (greedy, and the batch sizes where kernels change tiling).
use std::time::Instant;
use transduce::host::int8::Int8Matrix;
fn main() {
    for (m, k, n) in [
        (128usize, 192usize, 8000usize),
        (128, 192, 576),
        (128, 768, 192),
        (1, 192, 8000),
        (32, 192, 768),
        (128, 512, 58101),
        (128, 512, 1536),
        (128, 512, 512),
        (128, 512, 2048),
        (128, 2048, 512),
        (4, 512, 58101),
        (1, 512, 58101),
        (4, 512, 2048),
        (4, 2048, 512),
        (8, 512, 58101),
        (16, 512, 58101),
        (32, 512, 58101),
    ] {
        let w: Vec<f32> = (0..k * n)
            .map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let x: Vec<f32> = (0..m * k)
            .map(|i| ((i * 104729) % 1000) as f32 / 500.0 - 1.0)
            .collect();
        let q = Int8Matrix::quantize(k, n, &w, None);
        let mut out = Vec::new();
        q.apply(&x, m, &mut out);
        let reps = (2_000_000_000 / (m * k * n)).max(3);
        let t = Instant::now();
        for _ in 0..reps {
            q.apply(&x, m, &mut out);
        }
        let s = t.elapsed().as_secs_f64() / reps as f64;
        println!(
            "{m}x{k}x{n}: {:.1} us, {:.1} GMAC/s",
            s * 1e6,
            (m * k * n) as f64 / s / 1e9
        );
    }
}
