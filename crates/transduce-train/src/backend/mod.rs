//! Choosing the compute device: `--backend cpu|wgpu|cuda`, with the GPU backends'
//! persistent cache of tuning and kernels ([`cache`]) installed before a device opens.

pub mod cache;

use clap::ValueEnum;
use transduce::burn::prelude::*;

use crate::error::{Error, Result};
use cache::GpuApi;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// burn-flex on the CPU (pure Rust, SIMD, all cores).
    Cpu,
    /// wgpu: Vulkan, Metal or DX12, whichever the platform has.
    Wgpu,
    /// NVIDIA CUDA (build with `--features cuda`).
    Cuda,
}

impl Backend {
    /// The GPU API of a GPU backend; none for the CPU backends.
    fn gpu_api(self) -> Option<GpuApi> {
        match self {
            Backend::Cpu => None,
            Backend::Wgpu => Some(GpuApi::Wgpu),
            Backend::Cuda => Some(GpuApi::Cuda),
        }
    }

    /// Points cubecl's persistent cache at this GPU's folder ([`cache::install`]); the CPU
    /// backends have nothing to cache (and leave the place to a GPU device opened later).
    fn install_cache(self) {
        if let Some(api) = self.gpu_api() {
            cache::install(api);
        }
    }

    /// Points burn's default device at this backend: state restored from records is created
    /// on the default device.
    fn pin_default(self) {
        let name = match self {
            Backend::Cpu => "flex",
            Backend::Wgpu => "wgpu",
            Backend::Cuda => "cuda",
        };
        // SAFETY: called at start-up from the main thread, before any other thread exists.
        unsafe { std::env::set_var("BURN_DEVICE", name) };
    }

    /// The device, with burn's default device pinned to the same backend (state restored
    /// from records is created on the default device).
    pub fn device(self) -> Result<Device> {
        self.pin_default();
        self.install_cache();
        match self {
            Backend::Cpu => Ok(Device::flex()),
            Backend::Wgpu => {
                let (device, setup) = Device::wgpu_options().init_with_setup().map_err(|e| {
                    Error::Usage(format!(
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
            Backend::Cuda => cuda(0),
        }
    }

    /// Refuses a device number the backend cannot have, without opening a device: the
    /// CPU backends are the one device 0.
    pub fn check_number(self, index: Option<usize>) -> Result<()> {
        match (self, index) {
            (Backend::Cpu, Some(n)) if n > 0 => Err(Error::Usage(
                "--devices: the CPU backend is a single device (0) that already uses every \
                 core; data parallelism on it takes --nproc-per-node"
                    .into(),
            )),
            _ => Ok(()),
        }
    }

    /// The device numbered `index` (`train --devices`, one per rank), or with none
    /// [`Backend::device`]'s default.
    ///
    /// wgpu numbers count the machine's adapters (Vulkan/Metal/DX12) in wgpu's order; two
    /// ranks given the same number open a device (a queue) each on one adapter. CUDA numbers
    /// are device ordinals. The CPU backends are one device that already uses every core.
    pub fn device_numbered(self, index: Option<usize>) -> Result<Device> {
        self.check_number(index)?;
        self.install_cache();
        match (self, index) {
            (_, None) | (Backend::Cpu, _) => self.device(),
            (Backend::Cuda, Some(i)) => {
                let device = cuda(i)?;
                self.pin_default();
                Ok(device)
            }
            (Backend::Wgpu, Some(i)) => {
                self.pin_default();
                wgpu_device(i)
            }
        }
    }
}

/// Turns burn's kernel fusion (its `fusion` feature, on in this build) off for the GPU
/// backends when `enabled` is false: every built-in fusion is removed from the registry,
/// so each tensor operation runs as its own kernel. Must run before the first tensor
/// operation; the CPU backend never fuses.
pub fn set_fusion(enabled: bool) -> Result<()> {
    if enabled {
        return Ok(());
    }
    for name in burn_cubecl::fusion::BUILTIN_NAMES {
        burn_cubecl::fusion::remove(name).map_err(|e| Error::Usage(format!("--no-fusion: {e}")))?;
    }
    Ok(())
}

/// The wgpu device on adapter `index`, registered with burn as its own runtime.
fn wgpu_device(index: usize) -> Result<Device> {
    use transduce::burn::tensor::wgpu::{WgpuSetup, wgpu};
    cache::install(GpuApi::Wgpu);
    let instance = wgpu::Instance::default();
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::PRIMARY));
    if adapters.is_empty() {
        return Err(Error::Usage(
            "--devices: wgpu finds no Vulkan/Metal/DX12 adapter; on Linux without a GPU, \
             install mesa-vulkan-drivers for a software Vulkan device"
                .into(),
        ));
    }
    let adapter = adapters.get(index).cloned().ok_or_else(|| {
        Error::Usage(format!(
            "--devices: no wgpu adapter {index}; this machine has {}: {}",
            adapters.len(),
            adapters
                .iter()
                .enumerate()
                .map(|(i, a)| format!("{i} = {}", a.get_info().name))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?;
    let info = adapter.get_info();
    let failed =
        |e: String| Error::Usage(format!("--devices: adapter {index} ({}): {e}", info.name));
    // With the `spirv` feature a Vulkan adapter gets the device cubecl's SPIR-V
    // compiler needs (native Vulkan extensions on); others, and Vulkan adapters it
    // cannot serve, the request burn makes for its own devices: every feature the adapter has (mappable primary
    // buffers aside) and its full limits, compiled through WGSL.
    #[cfg(feature = "spirv")]
    let native = match info.backend {
        wgpu::Backend::Vulkan => {
            pollster::block_on(cubecl_wgpu::vulkan::try_request_vulkan_device(&adapter))
                .map_err(|e| failed(format!("{e:?}")))?
        }
        _ => None,
    };
    #[cfg(not(feature = "spirv"))]
    let native: Option<(wgpu::Device, wgpu::Queue)> = None;
    let (device, queue) = match native {
        Some(pair) => pair,
        None => pollster::block_on(
            adapter.request_device(&wgpu::DeviceDescriptor {
                label: Some("transduce training device"),
                required_features: adapter
                    .features()
                    .difference(wgpu::Features::MAPPABLE_PRIMARY_BUFFERS),
                required_limits: adapter.limits(),
                memory_hints: wgpu::MemoryHints::MemoryUsage,
                ..Default::default()
            }),
        )
        .map_err(|e| failed(e.to_string()))?,
    };
    let setup = WgpuSetup {
        instance: instance.clone(),
        adapter,
        device,
        queue,
        backend: info.backend,
    };
    let device = Device::wgpu_options()
        .setup(setup)
        .init()
        .map_err(|e| Error::Usage(format!("--devices: adapter {index} ({}): {e:?}", info.name)))?;
    // One write, newline included: ranks opening devices side by side would interleave
    // pieces of lines.
    let line = format!(
        "wgpu adapter {index}: {} ({:?}, {:?})\n",
        info.name, info.device_type, info.backend
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    Ok(device)
}

/// Whether one of `names` loads as a shared library: cudarc loads the NVIDIA libraries on
/// first use and panics where one is missing, so callers look first.
#[cfg(feature = "cuda")]
pub fn library_loads(names: &[&str]) -> bool {
    // SAFETY: loading a library runs its initialisers, as cudarc's own load would a moment
    // later.
    names
        .iter()
        .any(|name| unsafe { libloading::Library::new(name) }.is_ok())
}

#[cfg(feature = "cuda")]
fn cuda(index: usize) -> Result<Device> {
    // cudarc loads the driver library on first use and panics in a worker thread when it
    // is missing: look for it first, so a machine without one gets an error.
    const DRIVER: [&str; 2] = ["libcuda.so.1", "libcuda.so"];
    if !library_loads(&DRIVER) {
        return Err(Error::Usage(format!(
            "--backend cuda: no NVIDIA driver here ({} not found); \
             CUDA needs an NVIDIA GPU and its driver",
            DRIVER.join(" or ")
        )));
    }
    Ok(Device::cuda(index))
}

#[cfg(not(feature = "cuda"))]
fn cuda(_index: usize) -> Result<Device> {
    Err(Error::Usage(
        "this build has no CUDA support: rebuild with `cargo build --release --features cuda`"
            .into(),
    ))
}
