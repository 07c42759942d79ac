//! Evaluation metrics that reproduce the reference tools exactly: BLEU as sacreBLEU 2.6
//! computes it, and constituency bracket scores as EVALB with `COLLINS.prm`.
//!
//! Pure Rust with no model dependency, so it builds fast and runs anywhere (wasm32 too).

pub mod bleu;
pub mod evalb;
