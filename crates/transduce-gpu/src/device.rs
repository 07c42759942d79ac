//! The GPU: adapter, device and queue, what the adapter offers (f16 arithmetic, limits),
//! and reading a buffer back without blocking the browser.

use std::future::poll_fn;
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};

use transduce::{Error, Result};

/// A GPU device to decode on, with what was found about its adapter.
#[derive(Clone, Debug)]
pub struct Gpu {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    /// The device was opened with `shader-f16`: weights are stored in f16.
    pub(crate) f16: bool,
    /// The device was opened with `timestamp-query` (natively, where the adapter has it):
    /// [`crate::GpuModel::profile`] can time each dispatch.
    pub(crate) timestamps: bool,
    /// Shader loops keep naga's forced iteration bound (`TRANSDUCE_GPU_LOOP_BOUNDS=1`, to
    /// measure what dropping it gains); off natively otherwise (shaders.rs).
    pub(crate) loop_bounds: bool,
    /// The first error the device reported outside any call (validation, out of memory), or
    /// its loss: after one, every read fails with it, so callers fall back to the CPU.
    fault: Arc<Mutex<Option<String>>>,
}

/// What the decoder was given to run on, for logs and the page's badge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdapterSummary {
    pub name: String,
    /// `DiscreteGpu`, `IntegratedGpu`, `Cpu` (a software adapter), …
    pub device_type: String,
    pub backend: String,
    /// Weights are held in f16 (the adapter has `shader-f16`).
    pub f16: bool,
}

fn device_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Device(format!("{what}: {e}"))
}

impl Gpu {
    /// Opens the high-performance adapter (natively: the backends `WGPU_BACKEND` allows).
    /// `shader-f16` is asked for where the adapter has it, unless `allow_f16` is false.
    pub async fn new(allow_f16: bool) -> Result<Gpu> {
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
            .map_err(|e| device_error("no usable GPU adapter", e))?;
        Gpu::from_adapter(adapter, allow_f16).await
    }

    /// Opens a device on `adapter`, with the adapter's own limits (a base-preset model's
    /// caches exceed WebGPU's default buffer sizes).
    pub async fn from_adapter(adapter: wgpu::Adapter, allow_f16: bool) -> Result<Gpu> {
        let f16 = allow_f16 && adapter.features().contains(wgpu::Features::SHADER_F16);
        // Timestamps only natively: a page has no use for them, and browsers coarsen them.
        let timestamps = !cfg!(target_arch = "wasm32")
            && adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY);
        let mut features = wgpu::Features::empty();
        if f16 {
            features |= wgpu::Features::SHADER_F16;
        }
        if timestamps {
            features |= wgpu::Features::TIMESTAMP_QUERY;
        }
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("transduce-gpu"),
                required_features: features,
                required_limits: adapter.limits(),
                ..Default::default()
            })
            .await
            .map_err(|e| device_error("the GPU adapter refused a device", e))?;
        let fault: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
        let record = |fault: &Arc<Mutex<Option<String>>>| {
            let fault = fault.clone();
            move |message: String| {
                let mut slot = fault.lock().unwrap_or_else(|e| e.into_inner());
                slot.get_or_insert(message);
            }
        };
        // Errors become a recorded fault, never a panic (which would kill a wasm module).
        let on_error = record(&fault);
        device.on_uncaptured_error(Arc::new(move |e| on_error(format!("GPU error: {e}"))));
        let on_lost = record(&fault);
        device.set_device_lost_callback(move |reason, message| {
            on_lost(format!("the GPU device was lost ({reason:?}): {message}"))
        });
        Ok(Gpu {
            device,
            queue,
            info: adapter.get_info(),
            f16,
            timestamps,
            loop_bounds: cfg!(target_arch = "wasm32")
                || std::env::var("TRANSDUCE_GPU_LOOP_BOUNDS").is_ok_and(|v| v == "1"),
            fault,
        })
    }

    /// Whether shader loops keep naga's forced iteration bound: natively only where
    /// `TRANSDUCE_GPU_LOOP_BOUNDS=1` asks (to measure what dropping it gains); always in the
    /// browser, which decides for itself.
    pub fn loop_bounds(&self) -> bool {
        self.loop_bounds
    }

    /// The device failed or was lost: nothing more runs on it.
    pub fn is_lost(&self) -> bool {
        self.fault().is_some()
    }

    /// What failed, if anything did.
    pub fn fault(&self) -> Option<String> {
        self.fault.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Gives the device up (as a browser may at any time): later reads fail.
    pub fn destroy(&self) {
        self.fault
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(|| "the GPU device was destroyed".into());
        self.device.destroy();
    }

    /// The adapter, as a user would want it named.
    pub fn summary(&self) -> AdapterSummary {
        AdapterSummary {
            name: self.info.name.clone(),
            device_type: format!("{:?}", self.info.device_type),
            backend: format!("{:?}", self.info.backend),
            f16: self.f16,
        }
    }

    /// A software adapter (lavapipe, SwiftShader, WARP): never faster than the CPU decoder.
    pub fn is_software(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu
    }

    /// A read-only storage buffer holding `bytes` (16 zero bytes when empty: bindings must
    /// not be, and hold a vec4 at least).
    pub(crate) fn storage_buffer(&self, bytes: &[u8]) -> wgpu::Buffer {
        use wgpu::util::DeviceExt;
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: None,
                contents: if bytes.is_empty() { &[0; 16] } else { bytes },
                usage: wgpu::BufferUsages::STORAGE,
            })
    }

    /// A storage buffer of `len` bytes (a multiple of 4) filled in pieces by `fill(offset,
    /// piece)` (each piece's length a multiple of 4, written at `offset`): a large matrix
    /// goes up without a whole copy of it in host memory at once.
    pub(crate) fn storage_buffer_in_pieces(
        &self,
        len: usize,
        mut fill: impl FnMut(&mut dyn FnMut(usize, &[u8])),
    ) -> wgpu::Buffer {
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: len.max(16) as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        fill(&mut |offset, piece| self.queue.write_buffer(&buffer, offset as u64, piece));
        buffer
    }

    /// The device's limits.
    pub(crate) fn limits(&self) -> wgpu::Limits {
        self.device.limits()
    }

    /// Waits for `buffer` (MAP_READ) to map and copies its first `size` bytes out. Natively
    /// the device is polled until `submission` (the one whose copy filled it) is done, not
    /// the later ones; in the browser the mapping resolves on the event loop.
    pub(crate) async fn read(
        &self,
        buffer: &wgpu::Buffer,
        size: u64,
        submission: wgpu::SubmissionIndex,
    ) -> Result<Vec<u8>> {
        if let Some(fault) = self.fault() {
            return Err(Error::Device(fault));
        }
        type Slot = (
            Option<std::result::Result<(), wgpu::BufferAsyncError>>,
            Option<Waker>,
        );
        let slot: Arc<Mutex<Slot>> = Arc::new(Mutex::new((None, None)));
        let filled = slot.clone();
        buffer.map_async(wgpu::MapMode::Read, ..size, move |result| {
            let mut slot = filled.lock().unwrap_or_else(|e| e.into_inner());
            slot.0 = Some(result);
            if let Some(waker) = slot.1.take() {
                waker.wake();
            }
        });
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(submission),
                timeout: None,
            })
            .map_err(|e| device_error("waiting for the GPU", e))?;
        #[cfg(target_arch = "wasm32")]
        let _ = submission;
        poll_fn(|cx| {
            let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
            match slot.0.take() {
                Some(result) => Poll::Ready(result),
                None => {
                    slot.1 = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await
        .map_err(|e| device_error("reading back from the GPU", e))?;
        if let Some(fault) = self.fault() {
            buffer.unmap();
            return Err(Error::Device(fault));
        }
        let bytes = {
            let view = buffer
                .get_mapped_range(..size)
                .map_err(|e| device_error("reading back from the GPU", e))?;
            view.to_vec()
        };
        buffer.unmap();
        Ok(bytes)
    }
}
