//! Joining the job a launcher started: the collectives for the ranks its variables name
//! ([`super::env::Launch`]), or none for a single process.

use super::Collective;
use super::env::{Launch, Launcher};
use crate::error::{CliError, Result};

/// The collectives of the job `launch` describes; none for no job or a job of one rank.
pub fn join(launch: Option<&Launch>) -> Result<Option<Box<dyn Collective>>> {
    let Some(launch) = launch.filter(|l| l.world > 1) else {
        return Ok(None);
    };
    match launch.launcher {
        Launcher::OpenMpi | Launcher::Slurm => mpi_world(launch),
        Launcher::Torchrun => Err(CliError::Usage(format!(
            "torchrun-style rank {} of {}: joining through MASTER_ADDR:MASTER_PORT is not built yet; start the ranks with mpirun or srun (a build with --features mpi)",
            launch.rank, launch.world
        ))),
    }
}

#[cfg(feature = "mpi")]
fn mpi_world(launch: &Launch) -> Result<Option<Box<dyn Collective>>> {
    let world = super::mpi::MpiWorld::init()?;
    // srun without an MPI plugin starts processes that MPI sees as singletons.
    if (world.rank(), world.world()) != (launch.rank, launch.world) {
        return Err(CliError::Usage(format!(
            "{} says rank {} of {}, but MPI says rank {} of {}: start the ranks with mpirun, or srun --mpi=pmix",
            launch.launcher,
            launch.rank,
            launch.world,
            world.rank(),
            world.world()
        )));
    }
    Ok(Some(Box::new(world)))
}

#[cfg(not(feature = "mpi"))]
fn mpi_world(launch: &Launch) -> Result<Option<Box<dyn Collective>>> {
    Err(CliError::Usage(format!(
        "{} started {} ranks, but this transduce was built without MPI: build it with --features mpi (Open MPI's libopenmpi-dev)",
        launch.launcher, launch.world
    )))
}
