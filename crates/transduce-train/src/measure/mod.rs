//! What the trainer measures of itself: `transduce bench`'s workload ([`workload`]), the
//! census of a step's launches, kernels, reads and host time ([`census`]), the report
//! of where a run's start went ([`start`]), and `bench kernels`' table of each fused
//! kernel family against its unfused oracle ([`kernels`]).

pub mod census;
pub mod kernels;
pub mod start;
pub mod workload;
