//! # transduce
//!
//! The Transformer of "Attention Is All You Need" (Vaswani et al., 2017): the
//! encoder–decoder of §3, the decoding of §6.1 (greedy and beam search with a length
//! penalty over a key/value cache), and the bundle format that carries a trained model.
//!
//! Data flows one way: text → [`tokenizer`] → ids → [`model`] → [`decode`] → ids → text.
//! This crate has no file system, CLI or DOM: it takes bytes and returns tensors, tokens and
//! text, and builds for native targets and `wasm32-unknown-unknown` alike.

pub mod attention;
pub mod bundle;
pub mod config;
pub mod constants;
pub mod decode;
pub mod dropout;
pub mod embedding;
pub mod error;
pub mod host;
pub mod layers;
pub mod model;
pub mod ops;
pub mod positionwise;
pub mod precision;
pub mod rng;
pub mod stored;
pub mod task;
pub mod tokenizer;
#[cfg(any(feature = "train", not(target_arch = "wasm32")))]
pub mod train;

/// docs/LIBRARY.md's example, compiled and run as a doctest so that the page cannot drift
/// from the API.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/LIBRARY.md")]
pub struct LibraryPage;

pub use bundle::{Bundle, BundleConfig, BundleFiles, ChannelConfig, Task, WeightDtype};
pub use config::{ModelConfig, Positional};
pub use decode::{DecodeOptions, Hypothesis};
pub use error::{Error, Result};
pub use host::HostModel;
pub use model::Transformer;
pub use precision::Precision;
pub use tokenizer::Tokenizer;

/// Re-exported so dependents use the same burn as this crate.
pub use burn;
