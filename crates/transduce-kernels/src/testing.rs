//! What the GPU tests of every crate share: the lock that keeps them one at a time, launch
//! counting, the wgpu device, closeness. (Compiled in, not `cfg(test)`: the model crate's
//! and the trainer's tests use it too.)

use std::sync::{Mutex, MutexGuard, OnceLock};

use burn::prelude::{Device, DeviceKind};

pub use crate::launches::count_launches;

/// Held by every GPU test and every test that counts launches: launches are observed
/// process-wide through one hook, so a count must not see another test's kernels, nor
/// have its hook replaced by another count.
pub fn gpu_lock() -> MutexGuard<'static, ()> {
    static GPU: Mutex<()> = Mutex::new(());
    GPU.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The wgpu device, or `None` (the reason printed) where there is no adapter.
pub fn wgpu_device(test: &str) -> Option<Device> {
    wgpu_device_after(test, || {})
}

/// [`wgpu_device`], `setup` run first the first time (the trainer points cubecl's cache
/// where the command line keeps it). Initialized once per process and shared: a second
/// initialization fails with "already initialized" (also when a test opened the adapter
/// another way), which is taken as the default adapter.
pub fn wgpu_device_after(test: &str, setup: impl FnOnce()) -> Option<Device> {
    static DEVICE: OnceLock<Result<Device, String>> = OnceLock::new();
    let device = DEVICE.get_or_init(|| {
        setup();
        let init = || Device::wgpu_options().init();
        match std::panic::catch_unwind(init) {
            Ok(Ok(device)) => Ok(device),
            Ok(Err(e)) if format!("{e:?}").contains("already initialized") => {
                Ok(Device::wgpu(DeviceKind::DefaultDevice))
            }
            Ok(Err(e)) => Err(format!("{e:?}")),
            Err(_) => Err("initialization panicked".into()),
        }
    });
    match device {
        Ok(device) => Some(device.clone()),
        Err(why) => {
            transduce_testing::skip(format_args!(
                "{test}: no wgpu adapter ({why}); install mesa-vulkan-drivers"
            ));
            None
        }
    }
}

/// Each value of `got` within `tolerance` × the largest of `want` of its counterpart.
pub fn assert_close(what: &str, got: &[f32], want: &[f32], tolerance: f32) {
    assert_eq!(got.len(), want.len(), "{what}");
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tolerance * scale,
            "{what}[{i}]: {g} vs {w} (scale {scale})"
        );
    }
}

/// `n` test inputs in [−`half`, `half`] that repeat only after `period` (a prime, or 513),
/// offset by `shift`: multiples of 2·`half` / (`period` − 1), so with `period` 513 and
/// `half` 1 they are multiples of 1/256 and f16 holds them exactly.
pub fn values(n: usize, shift: usize, period: usize, half: f32) -> Vec<f32> {
    let step = (period - 1) as f32 / (2.0 * half);
    (0..n)
        .map(|i| (((i * 7919 + shift * 104_729) % period) as f32 / step) - half)
        .collect()
}
