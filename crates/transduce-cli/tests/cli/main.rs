//! The `transduce` binary end to end, one module per subcommand, on small synthetic
//! corpora and the shipped bundles. One test binary: each would otherwise link the whole
//! burn stack on its own.

mod harness;

mod adapt;
mod bench;
mod distributed;
mod eval;
mod hub;
mod import;
mod options;
mod parse;
mod prepare;
mod recipe;
mod table3;
mod train;
mod translate;
mod warmup;
