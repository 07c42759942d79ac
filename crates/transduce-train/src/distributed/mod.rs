//! Data-parallel training over processes, one per device: the job a launcher started
//! ([`env`]) or `train --nproc-per-node` starts itself ([`spawn`]), the collectives its
//! ranks talk through ([`Collective`]: over TCP in [`tcp`], through MPI, loaded at run time, in
//! [`mpi`]; [`join`] picks), and a step's gradients summed over the ranks
//! ([`reduce`]). On CUDA the replayed steps' sums go through NCCL instead, in device
//! memory (`nccl`, feature `cuda`); [`exchange`] chooses.
//!
//! Every rank holds the same weights and Adam state: rank 0's, broadcast at the start
//! (`train::run::shared_start`); each step rank r computes the gradients of batches
//! j ≡ r (mod world) of the step's group, the ranks sum them, and each applies the same update. Rank 0 alone
//! validates, logs, draws the progress bar and saves checkpoints.

pub mod dial;
pub mod env;
pub mod exchange_mode;
pub mod join;
pub mod mpi;
#[cfg(feature = "cuda")]
pub mod nccl;
pub mod reduce;
pub mod spawn;
pub mod store;
pub mod tcp;

use transduce::burn::prelude::*;

use crate::error::Result;

/// The collectives a data-parallel step needs, over the ranks of one job.
pub trait Collective {
    /// This process's rank, 0-based.
    fn rank(&self) -> usize;
    /// Ranks in the job.
    fn world(&self) -> usize;
    /// Sums `values` over the ranks, in place: every rank ends with the same sums.
    fn all_reduce_sum(&self, values: &mut [f32]) -> Result<()>;
    /// Rank 0's `bytes` to every rank (the others' are replaced).
    fn broadcast(&self, bytes: &mut Vec<u8>) -> Result<()>;

    /// Whether this is the rank that validates, logs and checkpoints.
    fn leads(&self) -> bool {
        self.rank() == 0
    }

    /// An error naming a peer that is gone, if one is; for a rank waiting on something
    /// other than this collective (NCCL). Without a cheap check: `Ok`.
    // Only NCCL's wait (feature `cuda`) and the tests ask.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    fn check_peers(&self) -> Result<()> {
        Ok(())
    }

    /// Sums in device memory, where the job has them (NCCL on CUDA).
    fn device_sums(&self) -> Option<&dyn DeviceSums> {
        None
    }
}

/// Sums over the ranks in device memory.
pub trait DeviceSums {
    /// Sums `values` (contiguous f32 on the job's device) over the ranks, in place.
    fn all_reduce_in_place(&self, values: &Tensor<1>) -> Result<()>;
}

/// A job of one rank: its sums are its own values. With NCCL (`train --exchange nccl`) it
/// runs a single process through the ranks' path, to compare it with a plain run.
pub struct Alone;

impl Collective for Alone {
    fn rank(&self) -> usize {
        0
    }
    fn world(&self) -> usize {
        1
    }
    fn all_reduce_sum(&self, _values: &mut [f32]) -> Result<()> {
        Ok(())
    }
    fn broadcast(&self, _bytes: &mut Vec<u8>) -> Result<()> {
        Ok(())
    }
}

/// How long a collective waits for a peer unless told (`train --collective-timeout`):
/// NCCL's watchdog's default.
pub const COLLECTIVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// A wait in seconds as messages give it: to a tenth, no trailing zeros ("1.5", "600").
pub(crate) fn seconds(wait: std::time::Duration) -> String {
    ((wait.as_secs_f64() * 10.0).round() / 10.0).to_string()
}

/// Rank 0's answer to a yes-or-no question every rank must answer alike (stop now?).
pub fn agree(collective: &dyn Collective, lead_says: bool) -> Result<bool> {
    let mut byte = vec![lead_says as u8];
    collective.broadcast(&mut byte)?;
    Ok(byte.first() == Some(&1))
}
