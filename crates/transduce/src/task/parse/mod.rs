//! English constituency parsing as sequence transduction (§6.3 of "Attention Is All You
//! Need"): words in, a linearized tree out.
//!
//! §6.3 casts parsing as translation in the manner of Vinyals et al. (2015), "Grammar as a
//! Foreign Language": the tree is written depth-first as a token sequence in which every
//! constituent opens with `(X`, closes with `)X` and every word is a placeholder `XX`:
//!
//! ```text
//! (S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))
//! source: The dog barks .
//! target: (S (NP XX XX )NP (VP XX )VP XX )S
//! ```
//!
//! This module holds everything of the task that is not the model:
//!
//! 1. [`parse_trees`] / [`parse_trees_lenient`]: Penn Treebank bracket reading (one tree
//!    per line, or multi-line `.mrg` files), with errors that name the line (`read.rs`).
//! 2. [`preprocess`]: the usual clean-up for parsing (no `-NONE-` elements, no function
//!    tags or co-indices, no outer unlabelled bracket; `preprocess.rs`).
//! 3. [`linearize`]: tree → (source words, target tokens) (`linearize.rs`).
//! 4. [`delinearize`] (strict, `delinearize.rs`) and [`repair`] (total, `repair.rs`):
//!    target tokens + words → tree.
//! 5. [`print_tree`]: tree → the bracket string EVALB reads (`print.rs`).
//! 6. [`ParseConstraint`]: a prefix automaton for constrained decoding that only lets the
//!    decoder write well-formed trees over exactly the source words (`constraint.rs`).
//!
//! The [`Tree`] itself lives in `tree.rs`.
//!
//! Only `std` is used, so the module builds for every target of the crate.

/// The one POS tag of the target side: Vinyals et al. (2015) normalise all POS tags to `XX`
/// (the model is not asked to tag), so `XX` is both the word slot of a target sequence and
/// the tag of every preterminal [`delinearize`] builds.
pub const PLACEHOLDER: &str = "XX";

/// Label given to a root that has to be made up: an outer unlabelled bracket holding
/// several constituents or a lone preterminal ([`preprocess`]), or several top-level pieces
/// ([`repair`]). EVALB's `COLLINS.prm` lists `TOP` as a `DELETE_LABEL`, so this bracket is
/// never scored.
pub const TOP: &str = "TOP";

/// POS tag of the Penn Treebank's empty elements (traces, null complementizers, …).
pub const NONE_TAG: &str = "-NONE-";

/// Deepest bracket nesting accepted by the reader and by [`delinearize`] (and built by
/// [`repair`]). Treebank trees are far shallower (a few dozen levels at most); the cap only
/// keeps the recursive tree functions (and the compiler-generated `Drop`) away from stack
/// overflow on hostile input.
pub const MAX_NESTING: usize = 1000;

mod constraint;
mod delinearize;
mod linearize;
mod preprocess;
mod print;
mod read;
mod repair;
#[cfg(test)]
mod tests;
mod tree;

pub use constraint::ParseConstraint;
pub use delinearize::{LinearError, delinearize};
pub use linearize::{TargetToken, close_token, linearize, open_token, target_vocabulary};
pub use preprocess::{preprocess, strip_function_tags};
pub use print::print_tree;
pub use read::{ReadReport, TreeError, TreeErrorKind, parse_trees, parse_trees_lenient};
pub use repair::repair;
pub use tree::Tree;
