//! What the trainer measures of itself: `transduce bench`'s workload ([`workload`]), the
//! census of a step's launches, kernels, reads and host time ([`census`]), and the report
//! of where a run's start went ([`start`]).

pub mod census;
pub mod start;
pub mod workload;
