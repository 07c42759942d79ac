//! The device a bundle runs on: WebGPU through burn's wgpu backend (in the module built with
//! the `webgpu` feature), or burn-flex on the CPU (in both modules).

use std::fmt;
use std::str::FromStr;

use transduce::burn::prelude::Device;

/// Which backend to load on. `auto` is decided by the JavaScript wrapper, which can see
/// the adapter (a software fallback adapter is slower than the CPU path).
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

/// An initialized device.
pub struct Loaded {
    pub choice: BackendChoice,
    pub device: Device,
    pub description: String,
}

impl Loaded {
    pub async fn init(choice: BackendChoice) -> Result<Loaded, String> {
        match choice {
            BackendChoice::Cpu => Ok(Loaded {
                choice,
                device: Device::flex(),
                description: "burn-flex (wasm SIMD)".to_string(),
            }),
            BackendChoice::WebGpu => webgpu().await.map(|(device, description)| Loaded {
                choice,
                device,
                description,
            }),
        }
    }
}

#[cfg(all(target_arch = "wasm32", feature = "webgpu"))]
async fn webgpu() -> Result<(Device, String), String> {
    use std::cell::RefCell;
    // The wgpu runtime can be initialized once per page (or worker); later bundles reuse it.
    thread_local! {
        static DEVICE: RefCell<Option<(Device, String)>> = const { RefCell::new(None) };
    }
    if let Some(found) = DEVICE.with(|d| d.borrow().clone()) {
        return Ok(found);
    }
    let (device, setup) = Device::wgpu_options()
        .init_with_setup_async()
        .await
        .map_err(|e| format!("WebGPU is not available: {e}"))?;
    let info = setup.adapter.get_info();
    let description = if info.name.is_empty() {
        format!("WebGPU ({:?})", info.device_type)
    } else {
        format!("WebGPU: {} ({:?})", info.name, info.device_type)
    };
    DEVICE.with(|d| *d.borrow_mut() = Some((device.clone(), description.clone())));
    Ok((device, description))
}

#[cfg(all(target_arch = "wasm32", not(feature = "webgpu")))]
async fn webgpu() -> Result<(Device, String), String> {
    Err(
        "this is the CPU module (built without the `webgpu` feature): \
         WebGPU runs in transduce-web-webgpu.js"
            .to_string(),
    )
}

#[cfg(not(target_arch = "wasm32"))]
async fn webgpu() -> Result<(Device, String), String> {
    Err("WebGPU exists only in the browser build".to_string())
}
