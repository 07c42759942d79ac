//! Where a bundle decodes: on the CPU (the host decoder, in both modules), or on WebGPU
//! through the GPU decoder (`transduce-gpu`, only in the module built with the `webgpu`
//! feature). The bundle itself is always read on the CPU; the GPU decoder uploads its
//! weights once.

use std::fmt;
use std::str::FromStr;

use transduce::Bundle;
use transduce::decode::{Constraint, DecodeOptions, Hypothesis};

/// Which backend to load on. `auto` is decided by the JavaScript wrapper, which can see
/// the adapter and measures both backends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    Cpu,
    WebGpu,
}

impl FromStr for BackendChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cpu" => Ok(BackendChoice::Cpu),
            "webgpu" => Ok(BackendChoice::WebGpu),
            other => Err(format!(
                "unknown backend `{other}` (expected \"cpu\" or \"webgpu\")"
            )),
        }
    }
}

impl fmt::Display for BackendChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BackendChoice::Cpu => "cpu",
            BackendChoice::WebGpu => "webgpu",
        })
    }
}

/// The CPU decoder's description.
pub const CPU_DEVICE: &str = "host decoder (wasm SIMD)";

/// The GPU decoder of a bundle, when this module has one.
pub struct Gpu {
    #[cfg(all(target_arch = "wasm32", feature = "webgpu"))]
    model: transduce_gpu::GpuModel,
    pub description: String,
}

impl Gpu {
    /// Opens WebGPU (once per worker) and uploads `bundle`'s weights.
    pub async fn load(bundle: &Bundle) -> Result<Gpu, String> {
        load(bundle).await
    }

    /// Each source's best output ids on the GPU.
    pub async fn best_outputs(
        &self,
        sources: &[Vec<u32>],
        options: &DecodeOptions,
        constraint: Option<&dyn Constraint>,
    ) -> transduce::Result<Vec<Vec<u32>>> {
        #[cfg(all(target_arch = "wasm32", feature = "webgpu"))]
        return self.model.best_outputs(sources, options, constraint).await;
        #[cfg(not(all(target_arch = "wasm32", feature = "webgpu")))]
        {
            let _ = (sources, options, constraint);
            Err(transduce::Error::Device(
                "no GPU decoder in this module".into(),
            ))
        }
    }

    /// Each source's finished hypotheses on the GPU, best first.
    pub async fn hypotheses(
        &self,
        sources: &[Vec<u32>],
        options: &DecodeOptions,
    ) -> transduce::Result<Vec<Vec<Hypothesis>>> {
        #[cfg(all(target_arch = "wasm32", feature = "webgpu"))]
        return self.model.hypotheses(sources, options, None).await;
        #[cfg(not(all(target_arch = "wasm32", feature = "webgpu")))]
        {
            let _ = (sources, options);
            Err(transduce::Error::Device(
                "no GPU decoder in this module".into(),
            ))
        }
    }

    /// Gives the device up, as the browser may at any time (for tests of the fallback).
    pub fn lose(&self) {
        #[cfg(all(target_arch = "wasm32", feature = "webgpu"))]
        self.model.gpu().destroy();
    }
}

#[cfg(all(target_arch = "wasm32", feature = "webgpu"))]
async fn load(bundle: &Bundle) -> Result<Gpu, String> {
    use std::cell::RefCell;
    use transduce_gpu::GpuModel;
    // One device per worker; later bundles reuse it.
    thread_local! {
        static DEVICE: RefCell<Option<transduce_gpu::Gpu>> = const { RefCell::new(None) };
    }
    let gpu = match DEVICE.with(|d| d.borrow().clone()).filter(|g| !g.is_lost()) {
        Some(gpu) => gpu,
        None => {
            let gpu = transduce_gpu::Gpu::new(true)
                .await
                .map_err(|e| format!("WebGPU is not available: {e}"))?;
            DEVICE.with(|d| *d.borrow_mut() = Some(gpu.clone()));
            gpu
        }
    };
    let host = bundle
        .host()
        .ok_or_else(|| "the bundle was not read on the CPU".to_string())?;
    let model = GpuModel::new(&gpu, host);
    let a = gpu.summary();
    // Browsers often hide the adapter's name.
    let name = match (a.name.is_empty(), a.device_type.as_str()) {
        (false, _) => a.name.clone(),
        (true, "Cpu") => "software adapter".to_string(),
        (true, _) => "GPU".to_string(),
    };
    Ok(Gpu {
        description: format!("{name} · GPU decoder, {} weights", model.storage()),
        model,
    })
}

#[cfg(all(target_arch = "wasm32", not(feature = "webgpu")))]
async fn load(_: &Bundle) -> Result<Gpu, String> {
    Err(
        "this is the CPU module (built without the `webgpu` feature): \
         WebGPU runs in transduce-web-webgpu.js"
            .to_string(),
    )
}

#[cfg(not(target_arch = "wasm32"))]
async fn load(_: &Bundle) -> Result<Gpu, String> {
    Err("WebGPU exists only in the browser build".to_string())
}
