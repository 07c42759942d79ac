//! Joining the job a launcher started: the collectives for the ranks its variables name
//! ([`super::env::Launch`]), or none for a single process. Ranks started torchrun's way
//! (`RANK`, `MASTER_ADDR`, …; also `train --nproc-per-node`) meet over TCP ([`super::tcp`]);
//! ranks started by `mpirun` or `srun` talk through MPI in a build with the `mpi` feature,
//! and over TCP without it when `MASTER_ADDR` and `MASTER_PORT` name rank 0's host.

use std::time::Duration;

use super::Collective;
use super::env::{Launch, Launcher};
use super::tcp::TcpWorld;
use crate::error::{CliError, Result};

/// The collectives of the job `launch` describes; none for no job or a job of one rank. No
/// collective waits for a silent peer longer than `timeout`.
pub fn join(launch: Option<&Launch>, timeout: Duration) -> Result<Option<Box<dyn Collective>>> {
    let Some(launch) = launch.filter(|l| l.world > 1) else {
        return Ok(None);
    };
    match (launch.launcher, &launch.master) {
        (Launcher::Torchrun, Some((addr, port))) => tcp_world(launch, addr, *port, timeout),
        (Launcher::Torchrun, None) => Err(CliError::Usage(format!(
            "rank {} of {} (RANK, WORLD_SIZE) without MASTER_ADDR and MASTER_PORT: set both to rank 0's host and a free port",
            launch.rank, launch.world
        ))),
        (Launcher::OpenMpi | Launcher::Slurm, _) => mpi_world(launch, timeout),
    }
}

fn tcp_world(
    launch: &Launch,
    addr: &str,
    port: u16,
    timeout: Duration,
) -> Result<Option<Box<dyn Collective>>> {
    let world = match &launch.store {
        None => TcpWorld::join(launch.rank, launch.world, addr, port, timeout)?,
        Some(key) => {
            TcpWorld::join_through_store(launch.rank, launch.world, (addr, port), key, timeout)?
        }
    };
    Ok(Some(Box::new(world)))
}

#[cfg(feature = "mpi")]
fn mpi_world(launch: &Launch, timeout: Duration) -> Result<Option<Box<dyn Collective>>> {
    let world = super::mpi::MpiWorld::init(timeout)?;
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
fn mpi_world(launch: &Launch, timeout: Duration) -> Result<Option<Box<dyn Collective>>> {
    match &launch.master {
        Some((addr, port)) => tcp_world(launch, addr, *port, timeout),
        None => Err(CliError::Usage(format!(
            "{} started {} ranks, but this transduce was built without MPI: build it with --features mpi (Open MPI's libopenmpi-dev), or set MASTER_ADDR and MASTER_PORT to rank 0's host and a free port for the ranks to meet over TCP",
            launch.launcher, launch.world
        ))),
    }
}
