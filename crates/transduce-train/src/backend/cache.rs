//! The GPU backends' persistent cache: autotune decisions and compiled kernels kept
//! between processes, so a second run, a resumed run and `bench` start without tuning.
//!
//! cubecl keeps them in one database per *environment*. By default that is
//! `target/environment` above the working folder, keyed only by the device's type and
//! index: a decision timed on an H100 would be taken on an H200. Here every process of a
//! GPU backend points cubecl at a folder of the user's cache
//! (`$TRANSDUCE_CACHE_DIR`, else `$XDG_CACHE_HOME/transduce`, else `~/.cache/transduce`),
//! one per GPU model and driver, and within it one per binary build and autotune level:
//! `gpu/<device>/<build>-<level>`. Carrying such a folder to a machine with the same GPU,
//! driver and binary makes it start warm (`transduce warmup` fills it ahead).
//!
//! A `cubecl.toml` (or `burn.toml`'s `[cubecl]`) that sets `[environment]` or
//! `[compilation] cache` keeps the say over those settings unless `TRANSDUCE_CACHE_DIR`
//! is set. `CUBECL_AUTOTUNE_CACHE=false` turns the autotune cache off.

use std::path::{Path, PathBuf};

use burn_cubecl::cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};

/// The GPU APIs whose tuning and kernels the cache keeps (the CPU backends have none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuApi {
    Wgpu,
    Cuda,
}

/// Builds kept per device: older ones are removed when a new build opens its folder.
const KEEP_BUILDS: usize = 4;

/// Where the cache went, for the start line.
#[derive(Clone, Debug, PartialEq)]
pub enum Placement {
    /// Our folder for this device, build and level.
    Folder(PathBuf),
    /// A cubecl configuration file decides.
    Configured(PathBuf),
    /// This build has no persistent cache (built without the `tune-cache` feature).
    Unavailable,
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Placement::Folder(dir) => write!(f, "{}", dir.display()),
            Placement::Configured(file) => write!(f, "as {} sets it", file.display()),
            Placement::Unavailable => write!(f, "none (built without the tune-cache feature)"),
        }
    }
}

/// The cache's root: `$TRANSDUCE_CACHE_DIR`, else the user's cache folder.
pub fn root() -> PathBuf {
    if let Some(dir) = std::env::var_os("TRANSDUCE_CACHE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("transduce");
    }
    if cfg!(target_os = "macos")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join("Library/Caches/transduce");
    }
    if let Some(dir) = std::env::var_os("LOCALAPPDATA") {
        return PathBuf::from(dir).join("transduce");
    }
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".cache/transduce"),
        None => std::env::temp_dir().join("transduce"),
    }
}

/// A name safe as one path component: letters, digits, `.`, `_`, `-`; runs of anything
/// else become one `-`.
pub fn component(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '.' | '_') {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_matches('-').to_string();
    if out.is_empty() {
        return "unnamed".into();
    }
    // Several adapters can name a long folder: keep it well under the 255-byte limit,
    // told apart by a hash of the whole.
    if out.len() > 120 {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        out.hash(&mut h);
        return format!("{}-{:016x}", &out[..100], h.finish());
    }
    out
}

/// This binary's build: its linker build id (any rebuild changes it), else its size and
/// modification time.
pub fn build() -> String {
    if let Some(id) = buildid::build_id().filter(|id| !id.is_empty()) {
        return id.iter().take(8).map(|b| format!("{b:02x}")).collect();
    }
    let meta = std::env::current_exe().and_then(std::fs::metadata);
    match meta {
        Ok(meta) => {
            let modified = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs());
            format!("{:x}-{modified:x}", meta.len())
        }
        Err(_) => "unknown-build".into(),
    }
}

/// The GPUs this backend would use, named by model and driver: every adapter wgpu sees
/// (the default device is one of them), or CUDA's devices with the driver's version.
pub fn device(api: GpuApi) -> String {
    match api {
        GpuApi::Wgpu => wgpu_devices(),
        GpuApi::Cuda => cuda_devices(),
    }
}

fn wgpu_devices() -> String {
    use transduce::burn::tensor::wgpu::wgpu;
    let instance = wgpu::Instance::default();
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::PRIMARY));
    let mut names: Vec<String> = adapters
        .iter()
        .map(|a| {
            let info = a.get_info();
            format!(
                "{:?}-{}-{:04x}-{}-{}",
                info.backend, info.name, info.device, info.driver, info.driver_info
            )
        })
        .collect();
    names.sort();
    names.dedup();
    match names.as_slice() {
        [] => "wgpu-no-adapter".into(),
        names => component(&format!("wgpu-{}", names.join("+"))),
    }
}

#[cfg(feature = "cuda")]
fn cuda_devices() -> String {
    use std::ffi::{c_char, c_int, c_uint};
    type Init = unsafe extern "C" fn(c_uint) -> c_int;
    type Count = unsafe extern "C" fn(*mut c_int) -> c_int;
    type Get = unsafe extern "C" fn(*mut c_int, c_int) -> c_int;
    type Name = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int;
    type Version = unsafe extern "C" fn(*mut c_int) -> c_int;
    // SAFETY: the NVIDIA driver's documented C entry points, called with valid pointers
    // and buffer sizes; cudarc loads the same library a moment later.
    unsafe {
        let Ok(lib) = libloading::Library::new("libcuda.so.1")
            .or_else(|_| libloading::Library::new("libcuda.so"))
        else {
            return "cuda-no-driver".into();
        };
        let (Ok(init), Ok(count), Ok(get), Ok(name), Ok(version)) = (
            lib.get::<Init>(b"cuInit\0"),
            lib.get::<Count>(b"cuDeviceGetCount\0"),
            lib.get::<Get>(b"cuDeviceGet\0"),
            lib.get::<Name>(b"cuDeviceGetName\0"),
            lib.get::<Version>(b"cuDriverGetVersion\0"),
        ) else {
            return "cuda-unknown-driver".into();
        };
        if init(0) != 0 {
            return "cuda-unusable-driver".into();
        }
        let mut driver = 0;
        version(&mut driver);
        let mut n = 0;
        count(&mut n);
        let mut names = Vec::new();
        for ordinal in 0..n {
            let mut dev = 0;
            if get(&mut dev, ordinal) != 0 {
                continue;
            }
            let mut buf = [0 as c_char; 256];
            if name(buf.as_mut_ptr(), buf.len() as c_int, dev) == 0 {
                let text = std::ffi::CStr::from_ptr(buf.as_ptr()).to_string_lossy();
                names.push(text.into_owned());
            }
        }
        names.sort();
        names.dedup();
        component(&format!("cuda-{}-driver-{driver}", names.join("+")))
    }
}

#[cfg(not(feature = "cuda"))]
fn cuda_devices() -> String {
    "cuda".into()
}

/// The cubecl configuration file above the working folder, if any, and whether it sets
/// where caches live or whether compiled kernels are kept.
fn configured() -> Option<PathBuf> {
    let mut dir = std::env::current_dir().ok()?;
    loop {
        for (name, section) in [
            ("cubecl.toml", None),
            ("CubeCL.toml", None),
            ("burn.toml", Some("cubecl")),
            ("Burn.toml", Some("cubecl")),
        ] {
            let path = dir.join(name);
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let Ok(value) = text.parse::<toml::Table>() else {
                // cubecl reports and skips a file it cannot parse; so do we.
                continue;
            };
            let table = match section {
                Some(s) => match value.get(s).and_then(|v| v.as_table()) {
                    Some(t) => t.clone(),
                    None => continue,
                },
                None => value,
            };
            let sets_cache = table.contains_key("environment")
                || table
                    .get("compilation")
                    .and_then(|c| c.as_table())
                    .is_some_and(|c| c.contains_key("cache"));
            // cubecl reads the first file it finds: a file that says nothing about caches
            // still wins over any further up.
            return sets_cache.then_some(path);
        }
        if !dir.pop() {
            return None;
        }
    }
}

/// Keeps the newest [`KEEP_BUILDS`] folders of one device: every rebuild of the binary
/// opens a new one, and a decision of an old build is never read again.
fn prune(device_dir: &Path, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(device_dir) else {
        return;
    };
    let mut builds: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path() != keep && e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    builds.sort_by_key(|b| std::cmp::Reverse(b.0));
    for (_, old) in builds.into_iter().skip(KEEP_BUILDS - 1) {
        let _ = std::fs::remove_dir_all(old);
    }
}

static PLACED: std::sync::OnceLock<Placement> = std::sync::OnceLock::new();

/// Where this process keeps its GPU cache, once a GPU device was opened.
pub fn placement() -> Option<&'static Placement> {
    PLACED.get()
}

/// Points cubecl's persistent cache at this device's folder (see the module's doc), once
/// per process, before the first GPU device is opened.
pub fn install(api: GpuApi) -> &'static Placement {
    PLACED.get_or_init(|| place(api))
}

fn place(api: GpuApi) -> Placement {
    if !cfg!(feature = "tune-cache") {
        return Placement::Unavailable;
    }
    let explicit = std::env::var_os("TRANSDUCE_CACHE_DIR").is_some_and(|d| !d.is_empty());
    if !explicit && let Some(file) = configured() {
        return Placement::Configured(file);
    }
    let mut config = CubeClRuntimeConfig::from_current_dir().override_from_env();
    let level = component(&format!("{:?}", config.autotune.level));
    let device_dir = root().join("gpu").join(device(api));
    let dir = device_dir.join(format!("{}-{level}", build()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!(
            "warning: GPU cache folder {}: {e}; tuning is not kept",
            dir.display()
        );
        return Placement::Unavailable;
    }
    prune(&device_dir, &dir);
    set(&mut config, &dir);
    if !CubeClRuntimeConfig::try_set(config) {
        // Something read cubecl's configuration first (an earlier device in this process).
        return Placement::Configured(PathBuf::from("cubecl's earlier configuration"));
    }
    Placement::Folder(dir)
}

#[cfg(feature = "tune-cache")]
fn set(config: &mut CubeClRuntimeConfig, dir: &Path) {
    use burn_cubecl::cubecl::config::cache::CacheConfig;
    config.environment.path = CacheConfig::Directory(dir.to_path_buf());
    config.compilation.cache = true;
}

#[cfg(not(feature = "tune-cache"))]
fn set(_config: &mut CubeClRuntimeConfig, _dir: &Path) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_are_safe_folder_names() {
        assert_eq!(
            component("Vulkan-llvmpipe (LLVM 15.0.6, 256 bits)-0000-llvmpipe-Mesa 22.3.6"),
            "vulkan-llvmpipe-llvm-15.0.6-256-bits-0000-llvmpipe-mesa-22.3.6"
        );
        assert_eq!(
            component("NVIDIA H100 80GB HBM3/../x"),
            "nvidia-h100-80gb-hbm3-..-x"
        );
        assert_eq!(component("///"), "unnamed");
    }

    #[test]
    fn the_build_is_named_the_same_every_time() {
        let b = build();
        assert!(!b.is_empty() && b == build());
        assert_eq!(component(&b), b);
    }

    #[test]
    fn pruning_keeps_the_newest_builds_and_the_open_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut made = Vec::new();
        for n in 0..6 {
            let p = dir.path().join(format!("b{n}"));
            std::fs::create_dir(&p).unwrap();
            let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000 + n);
            std::fs::File::open(&p).unwrap().set_modified(t).unwrap();
            made.push(p);
        }
        // b0 is the oldest but the one being opened: it stays.
        prune(dir.path(), &made[0]);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["b0", "b3", "b4", "b5"]);
    }
}
