//! The GPU decoder (`transduce-gpu`) for `--backend wgpu`: a bundle read on the CPU, its
//! weights uploaded to the adapter wgpu picks.

use transduce::Bundle;
use transduce_gpu::{Gpu, GpuModel};

use transduce_train::error::{Error, Result};

/// The adapter, opened once.
pub fn device() -> Result<Gpu> {
    let gpu = pollster::block_on(Gpu::new(true)).map_err(|e| {
        Error::Usage(format!(
            "--backend wgpu: {e}; on Linux without a GPU, install mesa-vulkan-drivers for a \
             software Vulkan device, or use --backend cpu"
        ))
    })?;
    let a = gpu.summary();
    eprintln!(
        "GPU decoder on {} ({}, {}{}{})",
        a.name,
        a.device_type,
        a.backend,
        if a.f16 { ", shader-f16" } else { "" },
        if gpu.loop_bounds() {
            ", loops bounded (TRANSDUCE_GPU_LOOP_BOUNDS=1)"
        } else {
            ""
        }
    );
    Ok(gpu)
}

/// `bundle`'s model on the GPU (the bundle must be loaded on the CPU backend).
pub fn upload(gpu: &Gpu, bundle: &Bundle) -> Result<GpuModel> {
    let host = bundle.host().ok_or_else(|| {
        Error::Usage("the GPU decoder reads a bundle loaded on the CPU backend".into())
    })?;
    Ok(upload_host(gpu, host))
}

/// A host decoder's weights on the GPU.
pub fn upload_host(gpu: &Gpu, host: &transduce::HostModel) -> GpuModel {
    let model = GpuModel::new(gpu, host);
    eprintln!(
        "GPU decoder: {:.1} MB of weights ({})",
        model.weight_bytes() as f64 / 1e6,
        model.storage()
    );
    model
}

/// [`upload`] on a freshly opened adapter.
pub fn open(bundle: &Bundle) -> Result<GpuModel> {
    upload(&device()?, bundle)
}
