//! Choosing the compute device: `--backend cpu|wgpu|cuda`.

use clap::ValueEnum;
use transduce::burn::prelude::*;

use crate::error::{CliError, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// burn-flex on the CPU (pure Rust, SIMD, all cores).
    Cpu,
    /// burn-ndarray on the CPU (deprecated in burn; kept for comparison).
    Ndarray,
    /// wgpu: Vulkan, Metal or DX12, whichever the platform has.
    Wgpu,
    /// NVIDIA CUDA (build with `--features cuda`).
    Cuda,
}

impl Backend {
    /// The device, with burn's default device pinned to the same backend (state restored
    /// from records is created on the default device).
    pub fn device(self) -> Result<Device> {
        let name = match self {
            Backend::Cpu => "flex",
            Backend::Ndarray => "ndarray",
            Backend::Wgpu => "wgpu",
            Backend::Cuda => "cuda",
        };
        // SAFETY: called at start-up from the main thread, before any other thread exists.
        unsafe { std::env::set_var("BURN_DEVICE", name) };
        match self {
            Backend::Cpu => Ok(Device::flex()),
            // Deprecated in burn 0.22, kept so the CPU backends can be compared.
            #[allow(deprecated)]
            Backend::Ndarray => Ok(Device::ndarray()),
            Backend::Wgpu => {
                let (device, setup) = Device::wgpu_options().init_with_setup().map_err(|e| {
                    CliError::Usage(format!(
                        "--backend wgpu: no usable GPU adapter ({e:?}); on Linux without a GPU, \
                         install mesa-vulkan-drivers for a software Vulkan device, or use --backend cpu"
                    ))
                })?;
                let info = setup.adapter.get_info();
                eprintln!(
                    "wgpu adapter: {} ({:?}, {:?})",
                    info.name, info.device_type, info.backend
                );
                Ok(device)
            }
            Backend::Cuda => cuda(),
        }
    }
}

#[cfg(feature = "cuda")]
fn cuda() -> Result<Device> {
    Ok(Device::cuda(0))
}

#[cfg(not(feature = "cuda"))]
fn cuda() -> Result<Device> {
    Err(CliError::Usage(
        "this build has no CUDA support: rebuild with `cargo build --release --features cuda`"
            .into(),
    ))
}
