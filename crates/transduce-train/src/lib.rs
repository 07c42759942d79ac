//! The trainer as a library: data, batches and the training engine of §5 (`train`), the
//! backends and their GPU cache, data-parallel ranks (`distributed`), with typed options
//! and one [`Error`]. The `transduce` command line (crates/transduce-cli) is a thin layer over
//! it: its subcommands, recipes and Table 3 parse flags into these options.
//!
//! Training from code: `examples/train.rs` prepares a TSV of pairs and trains `tiny`.

pub mod backend;
pub mod checkpoint_mean;
pub mod data;
pub mod distributed;
pub mod error;
pub mod fsutil;
pub mod memory;
pub mod model_folder;
pub mod pipe;
pub mod prepared;
pub mod rng;
pub mod train;

pub use error::{Error, Result};
