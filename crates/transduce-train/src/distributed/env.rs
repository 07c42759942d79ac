//! Which rank of which job this process is, from the variables the standard launchers set:
//! torchrun (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`), Open MPI's
//! `mpirun` (`OMPI_COMM_WORLD_RANK`, `…_SIZE`, `…_LOCAL_RANK`), the Hydra `mpiexec` of MPICH
//! and Intel MPI (`PMI_RANK`, `PMI_SIZE`, `MPI_LOCALRANKID`) and SLURM's `srun`
//! (`SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`). `srun --mpi=pmix` of an MPI program
//! sets an MPI's and SLURM's: they must then agree.

use std::fmt;

use crate::error::{Error, Result};

/// The launcher whose variables named the rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launcher {
    Torchrun,
    OpenMpi,
    /// MPICH's and Intel MPI's process manager, Hydra.
    Mpich,
    Slurm,
}

impl Launcher {
    /// The variables of a rank, its world size and its rank on the node, in that order.
    fn variables(self) -> [&'static str; 3] {
        match self {
            Launcher::Torchrun => ["RANK", "WORLD_SIZE", "LOCAL_RANK"],
            Launcher::OpenMpi => [
                "OMPI_COMM_WORLD_RANK",
                "OMPI_COMM_WORLD_SIZE",
                "OMPI_COMM_WORLD_LOCAL_RANK",
            ],
            Launcher::Mpich => ["PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"],
            Launcher::Slurm => ["SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"],
        }
    }
}

impl fmt::Display for Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Launcher::Torchrun => "torchrun",
            Launcher::OpenMpi => "Open MPI",
            Launcher::Mpich => "MPICH's mpiexec",
            Launcher::Slurm => "SLURM",
        })
    }
}

/// This process's place in a job of several.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// 0-based rank in the job; rank 0 validates, logs and checkpoints.
    pub rank: usize,
    /// Processes in the job.
    pub world: usize,
    /// Rank among the processes of this machine: the device it trains on.
    pub local_rank: usize,
    pub launcher: Launcher,
    /// Where rank 0 listens for the others (`MASTER_ADDR`, `MASTER_PORT`), where set:
    /// torchrun always sets them; with `mpirun` or `srun` they are read when the build has
    /// no MPI.
    pub master: Option<(String, u16)>,
    /// Where torchrun's agent serves its store on the master's port
    /// (`TORCHELASTIC_USE_AGENT_STORE=True`): the key under which rank 0 sets the port it
    /// listens on, one per run and restart ([`super::store`]).
    pub store: Option<String>,
}

impl Launch {
    /// The job described by the environment `var` reads (`std::env::var` in `train`), or
    /// none when no launcher's rank variable is set (a plain single process). One launcher's
    /// variables must be all there and consistent; two launchers' must agree.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Launch>> {
        let mut found: Vec<Launch> = Vec::new();
        for launcher in [
            Launcher::OpenMpi,
            Launcher::Mpich,
            Launcher::Slurm,
            Launcher::Torchrun,
        ] {
            if let Some(launch) = read(launcher, &var)? {
                found.push(launch);
            }
        }
        let Some(first) = found.first().cloned() else {
            return Ok(None);
        };
        for other in &found[1..] {
            if (other.rank, other.world) != (first.rank, first.world) {
                return Err(Error::Usage(format!(
                    "the launchers' variables disagree: {} says rank {} of {}, {} says rank {} of {}",
                    first.launcher,
                    first.rank,
                    first.world,
                    other.launcher,
                    other.rank,
                    other.world
                )));
            }
        }
        let master = found.iter().find_map(|l| l.master.clone());
        let store = found.iter().find_map(|l| l.store.clone());
        Ok(Some(Launch {
            master,
            store,
            ..first
        }))
    }

    /// [`Launch::from_vars`] over this process's environment.
    pub fn from_env() -> Result<Option<Launch>> {
        Launch::from_vars(|name| std::env::var(name).ok())
    }
}

/// One launcher's variables, if its rank variable is set.
fn read(launcher: Launcher, var: &impl Fn(&str) -> Option<String>) -> Result<Option<Launch>> {
    let [rank_var, world_var, local_var] = launcher.variables();
    let Some(rank) = var(rank_var) else {
        return Ok(None);
    };
    let number = |name: &str, value: Option<String>| -> Result<usize> {
        let value = value.ok_or_else(|| {
            Error::Usage(format!(
                "{rank_var} is set ({launcher}) but {name} is not: set both, or neither"
            ))
        })?;
        value.trim().parse::<usize>().map_err(|_| {
            Error::Usage(format!(
                "{name}={value:?} ({launcher}): expected a whole number"
            ))
        })
    };
    let rank = number(rank_var, Some(rank))?;
    let world = number(world_var, var(world_var))?;
    // A launcher may leave the local rank out (one process per machine): then it is 0.
    let local_rank = match var(local_var) {
        Some(value) => number(local_var, Some(value))?,
        None => 0,
    };
    if world == 0 || rank >= world {
        return Err(Error::Usage(format!(
            "{rank_var}={rank} with {world_var}={world} ({launcher}): the rank must be below the world size"
        )));
    }
    if local_rank > rank {
        return Err(Error::Usage(format!(
            "{local_var}={local_rank} above {rank_var}={rank} ({launcher}): a rank on a machine counts from the job's ranks"
        )));
    }
    let master = master(var)?;
    let agent_store = var("TORCHELASTIC_USE_AGENT_STORE").is_some_and(|v| v.trim() == "True");
    let store = (agent_store && master.is_some()).then(|| {
        let run = var("TORCHELASTIC_RUN_ID").unwrap_or_else(|| "none".into());
        let restart = var("TORCHELASTIC_RESTART_COUNT").unwrap_or_else(|| "0".into());
        format!("transduce/{}/{}/rank-0-port", run.trim(), restart.trim())
    });
    Ok(Some(Launch {
        rank,
        world,
        local_rank,
        launcher,
        master,
        store,
    }))
}

/// `MASTER_ADDR` and `MASTER_PORT`: both or neither.
fn master(var: &impl Fn(&str) -> Option<String>) -> Result<Option<(String, u16)>> {
    match (var("MASTER_ADDR"), var("MASTER_PORT")) {
        (None, None) => Ok(None),
        (Some(addr), Some(port)) => {
            let port = port.trim().parse::<u16>().map_err(|_| {
                Error::Usage(format!("MASTER_PORT={port:?}: expected a port number"))
            })?;
            if addr.trim().is_empty() {
                return Err(Error::Usage("MASTER_ADDR is empty".into()));
            }
            Ok(Some((addr.trim().to_string(), port)))
        }
        (Some(_), None) => Err(Error::Usage(
            "MASTER_ADDR is set but MASTER_PORT is not".into(),
        )),
        (None, Some(_)) => Err(Error::Usage(
            "MASTER_PORT is set but MASTER_ADDR is not".into(),
        )),
    }
}

/// The CUDA device of a launched rank: the `local_rank`-th device `CUDA_VISIBLE_DEVICES`
/// leaves visible (the driver numbers the visible ones from 0), or the only one when it
/// leaves one (`srun --gpus-per-task=1`: every task sees its own GPU as device 0). Without
/// the variable, device `local_rank`. wgpu numbers its adapters itself and is not affected.
pub fn cuda_device(local_rank: usize, visible: Option<&str>) -> Result<usize> {
    let Some(visible) = visible.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(local_rank);
    };
    let count = visible.split(',').filter(|d| !d.trim().is_empty()).count();
    match count {
        0 => Err(Error::Usage(format!(
            "CUDA_VISIBLE_DEVICES={visible:?} leaves no device visible"
        ))),
        1 => Ok(0),
        n if local_rank < n => Ok(local_rank),
        n => Err(Error::Usage(format!(
            "CUDA_VISIBLE_DEVICES={visible:?} leaves {n} devices visible, but this is local \
             rank {local_rank}: give each rank one device, or as many as the ranks on this machine"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(vars: &[(&str, &str)]) -> Result<Option<Launch>> {
        Launch::from_vars(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    fn error(vars: &[(&str, &str)]) -> String {
        match launch(vars) {
            Err(e) => e.to_string(),
            Ok(l) => panic!("{vars:?} accepted as {l:?}"),
        }
    }

    #[test]
    fn a_rank_takes_the_local_rank_th_visible_cuda_device() {
        assert_eq!(cuda_device(3, None).unwrap(), 3);
        assert_eq!(cuda_device(3, Some("")).unwrap(), 3);
        // srun --gpus-per-task=1: one visible device each, number 0 whatever the rank.
        assert_eq!(cuda_device(3, Some("5")).unwrap(), 0);
        // Four visible on a node of four ranks: rank r takes the r-th visible (number r).
        assert_eq!(cuda_device(2, Some("4,5,6,7")).unwrap(), 2);
        let e = cuda_device(4, Some("4,5,6,7")).unwrap_err().to_string();
        assert!(
            e.contains("leaves 4 devices visible") && e.contains("local rank 4"),
            "{e}"
        );
        assert!(cuda_device(0, Some(",")).is_err());
    }

    #[test]
    fn no_launcher_is_a_single_process() {
        assert_eq!(launch(&[("PATH", "/bin")]).unwrap(), None);
    }

    #[test]
    fn torchrun() {
        let l = launch(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_RANK", "1"),
            ("MASTER_ADDR", "node0"),
            ("MASTER_PORT", "29500"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            l,
            Launch {
                rank: 3,
                world: 8,
                local_rank: 1,
                launcher: Launcher::Torchrun,
                master: Some(("node0".into(), 29500)),
                store: None,
            }
        );
    }

    /// torchrun's agent serves its store on MASTER_PORT: no port is guessed, rank 0's
    /// own is found under a key of the run and the restart.
    #[test]
    fn torchruns_agent_store_is_at_master_port_with_a_key_per_restart() {
        let vars = [
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "node0"),
            ("MASTER_PORT", "29500"),
            ("TORCHELASTIC_USE_AGENT_STORE", "True"),
            ("TORCHELASTIC_RUN_ID", "job7"),
            ("TORCHELASTIC_RESTART_COUNT", "2"),
        ];
        let l = launch(&vars).unwrap().unwrap();
        assert_eq!(l.master, Some(("node0".into(), 29500)));
        assert_eq!(l.store.as_deref(), Some("transduce/job7/2/rank-0-port"));
        let l = launch(&vars[..5]).unwrap().unwrap();
        assert_eq!(l.store.as_deref(), Some("transduce/none/0/rank-0-port"));
    }

    #[test]
    fn open_mpi_mpich_and_slurm() {
        let l = launch(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!((l.rank, l.world, l.local_rank), (1, 4, 1));
        assert_eq!(l.launcher, Launcher::OpenMpi);
        let l = launch(&[("SLURM_PROCID", "5"), ("SLURM_NTASKS", "6")])
            .unwrap()
            .unwrap();
        assert_eq!((l.rank, l.world, l.local_rank), (5, 6, 0));
        assert_eq!(l.launcher, Launcher::Slurm);
        let l = launch(&[
            ("PMI_RANK", "3"),
            ("PMI_SIZE", "4"),
            ("MPI_LOCALRANKID", "1"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!((l.rank, l.world, l.local_rank), (3, 4, 1));
        assert_eq!(l.launcher, Launcher::Mpich);
    }

    #[test]
    fn agreeing_launchers_join_and_disagreeing_ones_are_refused() {
        // srun --mpi=pmix sets both.
        let both = [
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("SLURM_PROCID", "2"),
            ("SLURM_NTASKS", "4"),
        ];
        assert_eq!(launch(&both).unwrap().unwrap().launcher, Launcher::OpenMpi);
        let e = error(&[
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "4"),
        ]);
        assert_eq!(
            e,
            "the launchers' variables disagree: Open MPI says rank 2 of 4, SLURM says rank 1 of 4"
        );
    }

    #[test]
    fn inconsistent_variables_are_one_clear_error() {
        assert_eq!(
            error(&[("RANK", "4"), ("WORLD_SIZE", "4")]),
            "RANK=4 with WORLD_SIZE=4 (torchrun): the rank must be below the world size"
        );
        assert_eq!(
            error(&[("RANK", "0")]),
            "RANK is set (torchrun) but WORLD_SIZE is not: set both, or neither"
        );
        assert_eq!(
            error(&[("SLURM_PROCID", "x"), ("SLURM_NTASKS", "2")]),
            "SLURM_PROCID=\"x\" (SLURM): expected a whole number"
        );
        assert_eq!(
            error(&[("RANK", "1"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "2")]),
            "LOCAL_RANK=2 above RANK=1 (torchrun): a rank on a machine counts from the job's ranks"
        );
        assert_eq!(
            error(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "h")]),
            "MASTER_ADDR is set but MASTER_PORT is not"
        );
        assert_eq!(
            error(&[
                ("RANK", "0"),
                ("WORLD_SIZE", "2"),
                ("MASTER_ADDR", "h"),
                ("MASTER_PORT", "99999")
            ]),
            "MASTER_PORT=\"99999\": expected a port number"
        );
        assert!(error(&[("RANK", "0"), ("WORLD_SIZE", "0")]).contains("below the world size"));
    }
}
