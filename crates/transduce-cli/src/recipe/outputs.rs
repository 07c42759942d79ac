//! What stages write: text files whole or not at all, and translations through
//! `transduce translate` (shared by the stage runner and the rescoring teacher).

use std::path::Path;

use crate::cmd::{self, translate::TranslateCmd};
use transduce_train::error::{Result, io};
use transduce_train::fsutil;

use super::argv::Argv;

/// `transduce translate ARGS --input INPUT --output OUTPUT` (written whole or not at all).
pub(super) fn translate(mut args: Vec<String>, input: &Path, output: &Path) -> Result<()> {
    let part = output.with_extension("part");
    args.extend([
        "--input".into(),
        input.display().to_string(),
        "--output".into(),
        part.display().to_string(),
    ]);
    cmd::translate::run(Argv::<TranslateCmd>::read(&args)?)?;
    std::fs::rename(&part, output).map_err(io(output))
}

/// Writes `lines`, one per line, atomically (creating the folder).
pub(super) fn write_lines<'a>(path: &Path, lines: impl Iterator<Item = &'a str>) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    let mut text = String::new();
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    fsutil::write_atomic(path, text.as_bytes())
}
