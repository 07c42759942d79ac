//! File-system helpers: atomic writes, so an interrupted run never leaves a half file.

use std::path::Path;

use crate::error::{Result, io};

/// Writes `bytes` to a temporary file beside `path`, then renames it into place.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!(
        "{}.tmp",
        path.extension().and_then(|e| e.to_str()).unwrap_or("")
    ));
    std::fs::write(&tmp, bytes).map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}
