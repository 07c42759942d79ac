//! Checkpoints: `checkpoints/step-00001234/` holding the weights (`model.safetensors`),
//! Adam's state (`optimizer.bpk`) and the trainer's position (`state.json`). Each is
//! written into a temporary folder that is renamed into place, so a crash never leaves a
//! half-written checkpoint; only the newest `keep` are kept.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use transduce::bundle::{WeightDtype, load_weights, save_weights};
use transduce::burn::optim::ModuleOptimizer;
use transduce::burn::prelude::*;
use transduce::burn::tensor::Bytes;
use transduce::{ModelConfig, Transformer};

use crate::error::{Error, Result, io};

/// Where training stands: enough to continue exactly where it stopped.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainState {
    /// Optimizer steps taken.
    pub step: u64,
    /// Current epoch (0-based).
    pub epoch: u64,
    /// Next batch of this epoch's order.
    pub cursor: usize,
    /// Target tokens trained on.
    pub tokens: u64,
    /// Training wall time so far, seconds.
    pub elapsed_secs: f64,
    /// Half-precision training's loss scale ([`crate::train::engine::loss_scale`]); none in f32.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_scale: Option<crate::train::engine::loss_scale::LossScale>,
}

pub const MODEL_FILE: &str = "model.safetensors";
pub const OPTIMIZER_FILE: &str = "optimizer.bpk";
pub const STATE_FILE: &str = "state.json";

/// Every checkpoint of a run, oldest first.
pub fn list(run_dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let dir = run_dir.join("checkpoints");
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(io(&dir))? {
        let path = entry.map_err(io(&dir))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if let Some(step) = name
            .strip_prefix("step-")
            .and_then(|s| s.parse::<u64>().ok())
            && path.join(STATE_FILE).exists()
        {
            found.push((step, path));
        }
    }
    found.sort();
    Ok(found)
}

/// Writes a checkpoint and removes the oldest beyond `keep`.
pub fn save(
    run_dir: &Path,
    model: &Transformer,
    optimizer: &[u8],
    state: &TrainState,
    keep: usize,
) -> Result<PathBuf> {
    let dir = run_dir.join("checkpoints");
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let name = format!("step-{:08}", state.step);
    let tmp = dir.join(format!("{name}.tmp"));
    let done = dir.join(&name);
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(io(&tmp))?;
    }
    std::fs::create_dir_all(&tmp).map_err(io(&tmp))?;
    let weights = save_weights(model, WeightDtype::F32)?;
    std::fs::write(tmp.join(MODEL_FILE), weights).map_err(io(&tmp))?;
    std::fs::write(tmp.join(OPTIMIZER_FILE), optimizer).map_err(io(&tmp))?;
    let json = serde_json::to_string_pretty(state).expect("state serializes");
    std::fs::write(tmp.join(STATE_FILE), json).map_err(io(&tmp))?;
    if done.exists() {
        std::fs::remove_dir_all(&done).map_err(io(&done))?;
    }
    std::fs::rename(&tmp, &done).map_err(io(&done))?;
    let all = list(run_dir)?;
    if all.len() > keep.max(1) {
        for (_, old) in &all[..all.len() - keep.max(1)] {
            std::fs::remove_dir_all(old).map_err(io(old))?;
        }
    }
    Ok(done)
}

/// Reads a checkpoint's state.
pub fn read_state(checkpoint: &Path) -> Result<TrainState> {
    let path = checkpoint.join(STATE_FILE);
    let text = std::fs::read_to_string(&path).map_err(io(&path))?;
    serde_json::from_str(&text).map_err(|e| Error::Format {
        path,
        message: e.to_string(),
    })
}

/// Loads a checkpoint's weights into a model built from `config`.
pub fn load_model(checkpoint: &Path, config: &ModelConfig, device: &Device) -> Result<Transformer> {
    load_weights_file(&checkpoint.join(MODEL_FILE), config, device)
}

/// Loads a safetensors file (a checkpoint's, averaged weights, a bundle's, int8 ones
/// widened) into a model built from `config`; a mismatch names the file and the tensor.
pub fn load_weights_file(
    path: &Path,
    config: &ModelConfig,
    device: &Device,
) -> Result<Transformer> {
    let bytes = std::fs::read(path).map_err(io(path))?;
    load_weights(config, &bytes, device).map_err(|e| Error::Format {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// burn's Adam's state as a checkpoint stores it.
pub fn optimizer_bytes(optimizer: &ModuleOptimizer, run_dir: &Path) -> Result<Vec<u8>> {
    let bytes = optimizer.into_bytes().map_err(|e| Error::Format {
        path: run_dir.join(OPTIMIZER_FILE),
        message: format!("cannot serialize optimizer state: {e:?}"),
    })?;
    Ok(bytes.to_vec())
}

/// Restores the optimizer state saved beside the weights.
pub fn load_optimizer(checkpoint: &Path, optimizer: ModuleOptimizer) -> Result<ModuleOptimizer> {
    let path = checkpoint.join(OPTIMIZER_FILE);
    let bytes = std::fs::read(&path).map_err(io(&path))?;
    optimizer
        .from_bytes(Bytes::from_bytes_vec(bytes))
        .map_err(|e| Error::Format {
            path,
            message: format!("cannot restore optimizer state: {e:?}"),
        })
}
