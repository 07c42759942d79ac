//! Counting kernel launches: cubecl's one process-wide launch hook.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use burn_cubecl::cubecl::logging::{LaunchObservation, LaunchObserver};

/// What `f` returns, and the kernel launches issued while it runs. The hook sees every
/// thread's launches and is replaced by another observation: hold
/// [`crate::testing::gpu_lock`] in tests.
pub fn count_launches<R>(f: impl FnOnce() -> R) -> (R, u64) {
    #[derive(Default)]
    struct Count(AtomicU64);
    impl LaunchObserver for Count {
        fn launched(&self, _kernel: &'static str) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
    let count = Arc::new(Count::default());
    let observation = LaunchObservation::new(count.clone());
    let result = f();
    drop(observation);
    (result, count.0.load(Ordering::Relaxed))
}
