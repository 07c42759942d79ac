//! The training engine's integration tests, through the library's public API: steps taken
//! eagerly and replayed as graphs give the same losses and weights, shape classes train as
//! exact batches, ranks train as accumulation (`training` holds the shared helpers).

mod ranks;
mod replay;
mod training;
