//! One error type for the model crate: every bad input is a variant whose message says
//! what is wrong and where (file, tensor, field).

use thiserror::Error;

/// Everything that can go wrong when loading, configuring or running a model.
#[derive(Debug, Error)]
pub enum Error {
    /// `config.json` is not valid JSON or does not match the schema.
    #[error("config.json, line {line} column {column}: {message}")]
    ConfigSyntax {
        line: usize,
        column: usize,
        message: String,
    },
    /// A configuration value is out of range or inconsistent.
    #[error("invalid config: field `{field}`: {message}")]
    InvalidConfig { field: String, message: String },
    /// `model.safetensors` could not be parsed (truncated, corrupt, not safetensors).
    #[error("model.safetensors is truncated or corrupt: {0}")]
    CorruptWeights(String),
    /// A tensor the configuration needs is absent from the weights file.
    #[error("model.safetensors: missing tensor `{0}` (does config.json match these weights?)")]
    MissingTensor(String),
    /// A tensor has a shape other than the configuration implies.
    #[error(
        "model.safetensors: tensor `{name}` has shape {found:?}, but config.json implies {expected:?}"
    )]
    ShapeMismatch {
        name: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },
    /// The weights file holds tensors the configuration does not know.
    #[error(
        "model.safetensors: unexpected tensor(s) {0:?} not used by config.json (wrong config for these weights?)"
    )]
    UnexpectedTensors(Vec<String>),
    /// A tensor is stored in a dtype we cannot read.
    #[error(
        "model.safetensors: tensor `{name}` has unsupported dtype {dtype} (expected F32 or F16)"
    )]
    UnsupportedDtype { name: String, dtype: String },
    /// `tokenizer.json` could not be parsed or lacks the special tokens.
    #[error("tokenizer.json: {0}")]
    Tokenizer(String),
    /// Input text or token ids that cannot be processed.
    #[error("invalid input: {0}")]
    Input(String),
    /// Sentence pairs to adapt on ([`crate::train::adapt`]) that cannot be used: `place`
    /// names the file (or page field) and line.
    #[error("{place}: {message}")]
    Pairs { place: String, message: String },
    /// A device read or kernel failed.
    #[error("device error: {0}")]
    Device(String),
    /// A bundle file failed its checksum.
    #[error("{file}: sha256 is {found}, but config.json lists {expected}")]
    Checksum {
        file: String,
        expected: String,
        found: String,
    },
}

/// Result with the crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn invalid(field: &str, message: impl Into<String>) -> Self {
        Error::InvalidConfig {
            field: field.to_string(),
            message: message.into(),
        }
    }
}
