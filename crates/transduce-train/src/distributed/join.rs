//! Joining the job a launcher started: the collectives for the ranks its variables name
//! ([`super::env::Launch`]), or none for a single process. Ranks started torchrun's way
//! (`RANK`, `MASTER_ADDR`, …; also `train --nproc-per-node`) meet over TCP ([`super::tcp`]);
//! ranks started by `mpirun` or `srun` talk through MPI (loaded at run time), and over TCP
//! where no MPI library loads and `MASTER_ADDR` and `MASTER_PORT` name rank 0's host.

use std::time::Duration;

use super::Collective;
use super::env::{Launch, Launcher};
use super::mpi::Unavailable;
use super::tcp::TcpWorld;
use crate::error::{Error, Result};

/// The collectives of the job `launch` describes; none for no job or a job of one rank. No
/// collective waits for a silent peer longer than `timeout`.
pub fn join(launch: Option<&Launch>, timeout: Duration) -> Result<Option<Box<dyn Collective>>> {
    let Some(launch) = launch.filter(|l| l.world > 1) else {
        return Ok(None);
    };
    match (launch.launcher, &launch.master) {
        (Launcher::Torchrun, Some((addr, port))) => tcp_world(launch, addr, *port, timeout),
        (Launcher::Torchrun, None) => Err(Error::Usage(format!(
            "rank {} of {} (RANK, WORLD_SIZE) without MASTER_ADDR and MASTER_PORT: set both to rank 0's host and a free port",
            launch.rank, launch.world
        ))),
        (Launcher::OpenMpi | Launcher::Mpich | Launcher::Slurm, _) => mpi_world(launch, timeout),
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

/// Through MPI, loaded now; without an MPI library, over TCP where `MASTER_ADDR` and
/// `MASTER_PORT` name rank 0's host, else one error saying what to install.
fn mpi_world(launch: &Launch, timeout: Duration) -> Result<Option<Box<dyn Collective>>> {
    let world = match super::mpi::MpiWorld::init(launch.launcher, timeout) {
        Ok(world) => world,
        Err(Unavailable::Failed(e)) => return Err(e),
        Err(Unavailable::NoLibrary(why)) => {
            return match &launch.master {
                Some((addr, port)) => tcp_world(launch, addr, *port, timeout),
                None => Err(Error::Usage(format!(
                    "{} started {} ranks, but {why}; or set MASTER_ADDR and MASTER_PORT to rank 0's host and a free port for the ranks to meet over TCP",
                    launch.launcher, launch.world
                ))),
            };
        }
    };
    // srun without an MPI plugin starts processes that MPI sees as singletons.
    if (world.rank(), world.world()) != (launch.rank, launch.world) {
        return Err(Error::Usage(format!(
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
