//! The import's one error: what is wrong, in which of the model's files, as a code a program
//! can branch on (the browser package turns it into an `Error` with `code` and `file`).

use std::fmt;

/// What kind of problem stopped the import.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// A file the import needs is not among the model's files.
    MissingFile,
    /// A file is not what its name says (not JSON, not a SentencePiece model, a damaged
    /// checkpoint, …).
    Corrupt,
    /// The file is well formed, but it describes a model this import cannot represent
    /// (a config field, a tokenizer kind, learned positions, …).
    Unsupported,
    /// No licence is known for the weights: the model card names none and none was given.
    NoLicence,
    /// The languages cannot be told from the model's name and none were given.
    NoLanguages,
}

impl ErrorCode {
    /// The code as the browser package spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::MissingFile => "missing-file",
            ErrorCode::Corrupt => "corrupt",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::NoLicence => "no-licence",
            ErrorCode::NoLanguages => "no-languages",
        }
    }
}

/// Why a model cannot be imported: the file (a name such as `config.json`, or none when the
/// problem is not one file's) and a message that names the field or tensor at fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub code: ErrorCode,
    pub file: Option<String>,
    pub message: String,
}

impl Error {
    pub fn new(code: ErrorCode, file: Option<&str>, message: impl Into<String>) -> Error {
        Error {
            code,
            file: file.map(str::to_string),
            message: message.into(),
        }
    }

    /// A file that is not what it should be.
    pub fn corrupt(file: &str, message: impl Into<String>) -> Error {
        Error::new(ErrorCode::Corrupt, Some(file), message)
    }

    /// A well-formed file describing what the import cannot represent.
    pub fn unsupported(file: &str, message: impl Into<String>) -> Error {
        Error::new(ErrorCode::Unsupported, Some(file), message)
    }

    pub fn missing(file: &str, message: impl Into<String>) -> Error {
        Error::new(ErrorCode::MissingFile, Some(file), message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{file}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
