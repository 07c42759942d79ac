//! The trainer's errors: every one says what went wrong and where (file, line, field).

use std::path::{Path, PathBuf};

/// What went wrong in the trainer, its data or its files, and where.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}, line {line}: invalid UTF-8 ({detail})")]
    Utf8 {
        path: PathBuf,
        line: usize,
        detail: String,
    },
    #[error("{path}: the file is empty")]
    EmptyFile { path: PathBuf },
    #[error("line counts differ: {src_path} has {src_lines} lines but {tgt_path} has {tgt_lines}")]
    LineCount {
        src_path: PathBuf,
        src_lines: usize,
        tgt_path: PathBuf,
        tgt_lines: usize,
    },
    #[error("{path}: {message}")]
    Format { path: PathBuf, message: String },
    /// A recipe that cannot run as written: the file and line of the field at fault.
    #[error("{}:{line}: {message}", path.display())]
    Recipe {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error(transparent)]
    Model(#[from] transduce::Error),
    #[error("{0}")]
    Usage(String),
}

pub type Result<T> = std::result::Result<T, Error>;

/// Attaches a path to an I/O error.
pub fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A subcommand's arguments that its own parser refused (a recipe's stage builds them).
impl From<clap::Error> for Error {
    fn from(e: clap::Error) -> Self {
        Error::Usage(e.render().to_string().trim().to_string())
    }
}
