//! What a run observes of itself: the census of a step's launches, kernels, reads and host
//! time ([`census`], which `bench` and the counting tests read), and where its start went
//! ([`start_time`]).

pub mod census;
pub mod start_time;
