//! How the process's allocator treats the CPU backend's tensors.
//!
//! burn-flex allocates a fresh buffer for every op's output and frees its inputs as soon as
//! they are consumed. glibc's malloc serves buffers above its mmap threshold (128 KiB, rising
//! to 32 MiB) straight from the kernel and unmaps them on free, so every training step paid
//! page faults and the kernel's zeroing for each large activation, gradient and logits
//! tensor again (about a fifth of a `mini` step in `perf`). Keeping freed memory in the heap
//! instead makes `transduce bench --preset mini --backend cpu` train ≈ 45% faster here
//! (docs/BENCHMARKS.md); the price is that the process keeps its peak heap until it exits,
//! which a trainer or a translation job does anyway.

/// Keeps freed memory in the process for reuse (glibc: no mmap'd chunks, no trimming).
/// Other allocators (macOS, Windows, musl) are left as they are.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // From glibc's <malloc.h>.
        const M_TRIM_THRESHOLD: i32 = -1;
        const M_MMAP_MAX: i32 = -4;
        unsafe extern "C" {
            fn mallopt(param: i32, value: i32) -> i32;
        }
        // SAFETY: mallopt only changes malloc's tunables; it is called once, first thing in
        // main, before any thread exists.
        unsafe {
            mallopt(M_MMAP_MAX, 0);
            mallopt(M_TRIM_THRESHOLD, i32::MAX);
        }
    }
}
