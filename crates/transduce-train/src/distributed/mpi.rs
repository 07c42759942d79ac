//! [`Collective`] through MPI (rsmpi over Open MPI): `mpirun -n N transduce train …`, or
//! `srun` where SLURM starts Open MPI programs. MPI's default error handler on the world
//! communicator is fatal, so a failed collective ends the job rather than returning.

use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Root};

use super::Collective;
use crate::error::{CliError, Result};

/// The MPI world of this process; MPI is finalized when it is dropped.
pub struct MpiWorld {
    // Declared first so it is dropped before the universe that finalizes MPI.
    world: SimpleCommunicator,
    _universe: Universe,
}

impl MpiWorld {
    /// Initializes MPI (once per process).
    pub fn init() -> Result<MpiWorld> {
        let universe = mpi::initialize().ok_or_else(|| {
            CliError::Usage("MPI could not be initialized (was it initialized before?)".into())
        })?;
        Ok(MpiWorld {
            world: universe.world(),
            _universe: universe,
        })
    }
}

impl Collective for MpiWorld {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn world(&self) -> usize {
        self.world.size() as usize
    }

    fn all_reduce_sum(&self, values: &mut [f32]) -> Result<()> {
        let send = values.to_vec();
        self.world
            .all_reduce_into(&send[..], values, mpi::collective::SystemOperation::sum());
        Ok(())
    }

    fn broadcast(&self, bytes: &mut Vec<u8>) -> Result<()> {
        let root = self.world.process_at_rank(0);
        let mut len = bytes.len() as u64;
        root.broadcast_into(&mut len);
        bytes.resize(len as usize, 0);
        // An empty slice's pointer is dangling, which Open MPI refuses even for 0 bytes.
        if len > 0 {
            root.broadcast_into(&mut bytes[..]);
        }
        Ok(())
    }
}
