//! The trainer as a library: data, batches and the training engine of §5 (`train`), the
//! backends and their GPU cache, data-parallel ranks (`distributed`), with typed options
//! and one [`Error`]. The `transduce` command line (`src/main.rs`) is a thin layer over it:
//! its subcommands (`cmd`), recipes and Table 3 parse flags into these options.
//!
//! Training from code: `examples/train.rs` prepares a TSV of pairs and trains `tiny`.

pub mod backend;
mod channel;
mod checkpoint_mean;
pub mod cmd;
pub mod data;
mod decoder;
pub mod distributed;
pub mod error;
mod fsutil;
mod gpu;
mod hub;
mod measure;
pub mod memory;
mod options;
mod parsing;
pub mod pipe;
pub mod prepared;
pub mod recipe;
pub mod rng;
mod source;
mod table3;
pub mod train;

pub use error::{Error, Result};
