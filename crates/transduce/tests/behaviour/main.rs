//! The model crate's behaviour from outside, one module per subject. One test binary: each
//! would otherwise link the whole burn stack on its own (about 20 s of a clean build each).

mod common;

mod bundle;
mod decode;
mod fuzz;
mod host;
mod learning;
mod model;
mod parse_decoding;
mod word_focus;
