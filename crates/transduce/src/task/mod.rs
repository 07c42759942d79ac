//! What differs per task: translation needs nothing beyond the tokenizer; parsing (§6.3)
//! has trees, their linearization and the well-formedness constraint.

pub mod parse;
