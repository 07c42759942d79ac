//! Data: corpora → tokens → cached ids → batches.

pub mod batch;
pub mod cache;
pub mod corpus;
pub mod shape;
