//! Data-parallel training over processes, one per device: the job a launcher started
//! ([`env`]) or `train --nproc-per-node` starts itself ([`spawn`]), the collectives its
//! ranks talk through ([`Collective`]: over TCP in [`tcp`], through MPI in `mpi` with the
//! feature `mpi`; [`join`] picks), and a step's gradients summed over the ranks
//! ([`reduce`]).
//!
//! Every rank holds the same weights and Adam state: rank 0's, broadcast at the start
//! ([`start`]); each step rank r computes the gradients of batches j ≡ r (mod world) of the
//! step's group, the ranks sum them, and each applies the same update. Rank 0 alone
//! validates, logs, draws the progress bar and saves checkpoints.

pub mod env;
pub mod join;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod reduce;
pub mod spawn;
pub mod start;
pub mod tcp;

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
}

/// Rank 0's answer to a yes-or-no question every rank must answer alike (stop now?).
pub fn agree(collective: &dyn Collective, lead_says: bool) -> Result<bool> {
    let mut byte = vec![lead_says as u8];
    collective.broadcast(&mut byte)?;
    Ok(byte.first() == Some(&1))
}
