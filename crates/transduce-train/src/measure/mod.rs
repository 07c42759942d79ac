//! What `transduce bench` measures: its workload ([`workload`]) and `bench kernels`' table
//! of each fused kernel family against its unfused oracle ([`kernels`]). What a run
//! observes of itself (its steps' census, where its start went) is `train::observe`.

pub mod kernels;
pub mod workload;
