//! `train --nproc-per-node N` (and `--devices` listing several): this process starts the
//! job's ranks on this machine itself, as torchrun does. Each is this program again, with
//! the same arguments and torchrun's variables (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`,
//! `LOCAL_WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`), so it joins over TCP
//! ([`super::tcp`]). With `--nnodes M --node-rank R` the same command on each of M
//! machines makes one job of M × N ranks.
//!
//! The starter waits for its ranks. When one fails, the others stop by themselves (they
//! lose its connection); any still running 5 s later are killed (a stopped rank, or one
//! busy validating: checkpoints are renamed into place whole, so none is cut), and the
//! starter exits with the failed rank's reason. Ranks die with their starter
//! (`PR_SET_PDEATHSIG`).

use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Set in the ranks this process starts, so they run as ranks and start none of their own.
pub const STARTED_RANK: &str = "TRANSDUCE_STARTED_RANK";
/// How long the other ranks get to stop after one failed.
const GRACE: Duration = Duration::from_secs(5);

/// The ranks to start on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalRanks {
    /// Ranks on this machine.
    pub nproc: usize,
    /// Machines in the job, each starting `nproc` ranks.
    pub nnodes: usize,
    /// This machine's place, 0-based: its ranks are `node_rank × nproc …`.
    pub node_rank: usize,
    /// Rank 0's host, as the other machines reach it.
    pub master_addr: String,
    /// Where rank 0 listens; on one machine a free port is chosen when none is given.
    pub master_port: Option<u16>,
}

impl LocalRanks {
    /// The ranks `--nproc-per-node`, `--devices`, `--nnodes`, `--node-rank` and
    /// `--master-addr`/`--master-port` ask this process to start, or none (train in this
    /// process: one device, no job).
    pub fn requested(
        nproc_per_node: Option<usize>,
        devices: &[usize],
        nnodes: usize,
        node_rank: usize,
        master_addr: Option<&str>,
        master_port: Option<u16>,
    ) -> Result<Option<LocalRanks>> {
        let nproc = match (nproc_per_node, devices.len()) {
            (Some(n), d) if d > 1 && d != n => {
                return Err(Error::Usage(format!(
                    "--nproc-per-node {n} with --devices listing {d}: one rank per listed device (drop --nproc-per-node, or list {n} devices)"
                )));
            }
            (Some(n), _) => n,
            (None, d) => d.max(1),
        };
        if nproc == 0 {
            return Err(Error::Usage(
                "--nproc-per-node 0: start at least one rank".into(),
            ));
        }
        if node_rank >= nnodes {
            return Err(Error::Usage(format!(
                "--node-rank {node_rank} with --nnodes {nnodes}: machines count from 0"
            )));
        }
        if nnodes > 1 && (master_addr.is_none() || master_port.is_none()) {
            return Err(Error::Usage(format!(
                "--nnodes {nnodes}: give every machine the same --master-addr (machine 0's host) and --master-port"
            )));
        }
        if nproc * nnodes == 1 {
            return Ok(None);
        }
        Ok(Some(LocalRanks {
            nproc,
            nnodes,
            node_rank,
            master_addr: master_addr.unwrap_or("127.0.0.1").to_string(),
            master_port,
        }))
    }

    /// Ranks in the whole job.
    pub fn world(&self) -> usize {
        self.nproc * self.nnodes
    }

    /// The variables of local rank `local` (`port` is rank 0's).
    pub fn variables(&self, local: usize, port: u16) -> Vec<(&'static str, String)> {
        vec![
            ("RANK", (self.node_rank * self.nproc + local).to_string()),
            ("WORLD_SIZE", self.world().to_string()),
            ("LOCAL_RANK", local.to_string()),
            ("LOCAL_WORLD_SIZE", self.nproc.to_string()),
            ("GROUP_RANK", self.node_rank.to_string()),
            ("MASTER_ADDR", self.master_addr.clone()),
            ("MASTER_PORT", port.to_string()),
            (STARTED_RANK, "1".to_string()),
        ]
    }
}

/// Whether this process is a rank a starter started.
pub fn is_started_rank() -> bool {
    std::env::var_os(STARTED_RANK).is_some()
}

/// Starts `ranks` as this program with this process's arguments and waits for them: `Ok`
/// when every one succeeded, else the first failure.
pub fn run(ranks: &LocalRanks) -> Result<()> {
    let port = match ranks.master_port {
        Some(port) => port,
        None => free_port()?,
    };
    let exe = std::env::current_exe()
        .map_err(|e| Error::Usage(format!("cannot find this program to start ranks: {e}")))?;
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    eprintln!(
        "starting ranks {}–{} of {} on this machine (rank 0 at {}:{port})",
        ranks.node_rank * ranks.nproc,
        (ranks.node_rank + 1) * ranks.nproc - 1,
        ranks.world(),
        ranks.master_addr
    );
    let mut children: Vec<(usize, Child)> = Vec::with_capacity(ranks.nproc);
    for local in 0..ranks.nproc {
        let mut command = Command::new(&exe);
        command.args(&args).envs(ranks.variables(local, port));
        die_with_parent(&mut command);
        match command.spawn() {
            Ok(child) => children.push((ranks.node_rank * ranks.nproc + local, child)),
            Err(e) => {
                stop(&mut children);
                return Err(Error::Usage(format!(
                    "cannot start local rank {local}: {e}"
                )));
            }
        }
    }
    wait(children)
}

/// Waits for every rank; after the first failure, kills those still running after
/// [`GRACE`].
fn wait(mut children: Vec<(usize, Child)>) -> Result<()> {
    let mut failure: Option<(usize, ExitStatus, Instant)> = None;
    while !children.is_empty() {
        let mut i = 0;
        while i < children.len() {
            match children[i].1.try_wait() {
                Ok(Some(status)) => {
                    let (rank, _) = children.swap_remove(i);
                    if !status.success() && failure.is_none() {
                        failure = Some((rank, status, Instant::now()));
                    }
                }
                Ok(None) => i += 1,
                Err(e) => {
                    stop(&mut children);
                    return Err(Error::Usage(format!("waiting for the ranks: {e}")));
                }
            }
        }
        if let Some((rank, _, at)) = &failure
            && at.elapsed() >= GRACE
            && !children.is_empty()
        {
            eprintln!(
                "rank {rank} failed {} s ago and {} rank(s) still run: stopping them",
                GRACE.as_secs(),
                children.len()
            );
            stop(&mut children);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    match failure {
        None => Ok(()),
        Some((rank, status, _)) => Err(Error::Usage(format!(
            "rank {rank} failed ({status}); the job stopped (the last checkpoint resumes it)"
        ))),
    }
}

/// Kills and reaps every rank still running.
fn stop(children: &mut Vec<(usize, Child)>) {
    for (_, child) in children.iter_mut() {
        let _ = child.kill();
        let _ = child.wait();
    }
    children.clear();
}

/// A port no one listens on now (the kernel's choice), for rank 0 on this machine.
fn free_port() -> Result<u16> {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| Error::Usage(format!("no free port for the ranks to meet on: {e}")))
}

/// The rank gets SIGTERM when its starter dies, so no rank outlives the job's command.
#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches only this (forked) process.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_: &mut Command) {}

#[cfg(test)]
mod tests {
    use super::*;

    fn requested(nproc: Option<usize>, devices: &[usize]) -> Result<Option<LocalRanks>> {
        LocalRanks::requested(nproc, devices, 1, 0, None, None)
    }

    #[test]
    fn one_device_and_no_count_train_in_this_process() {
        assert_eq!(requested(None, &[]).unwrap(), None);
        assert_eq!(requested(None, &[3]).unwrap(), None);
        assert_eq!(requested(Some(1), &[]).unwrap(), None);
    }

    #[test]
    fn devices_listing_several_start_a_rank_each() {
        let ranks = requested(None, &[0, 1, 2]).unwrap().unwrap();
        assert_eq!((ranks.nproc, ranks.world()), (3, 3));
        assert_eq!(requested(Some(3), &[0, 1, 2]).unwrap(), Some(ranks));
        assert_eq!(
            requested(Some(2), &[0, 1, 2]).unwrap_err().to_string(),
            "--nproc-per-node 2 with --devices listing 3: one rank per listed device (drop --nproc-per-node, or list 2 devices)"
        );
    }

    #[test]
    fn machines_number_their_ranks_after_the_machines_before() {
        let ranks = LocalRanks::requested(Some(4), &[], 2, 1, Some("node0"), Some(29500))
            .unwrap()
            .unwrap();
        let vars = ranks.variables(3, 29500);
        let get = |name: &str| vars.iter().find(|(k, _)| *k == name).unwrap().1.clone();
        assert_eq!(get("RANK"), "7");
        assert_eq!(get("WORLD_SIZE"), "8");
        assert_eq!(get("LOCAL_RANK"), "3");
        assert_eq!(get("MASTER_ADDR"), "node0");
        // The variables name a job that env::Launch reads back as this rank.
        let launch = super::super::env::Launch::from_vars(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.clone())
        })
        .unwrap()
        .unwrap();
        assert_eq!((launch.rank, launch.world, launch.local_rank), (7, 8, 3));
        assert_eq!(launch.master, Some(("node0".into(), 29500)));
    }

    #[test]
    fn several_machines_need_rank_zeros_address() {
        let e = LocalRanks::requested(Some(2), &[], 2, 0, None, Some(1)).unwrap_err();
        assert!(e.to_string().contains("the same --master-addr"), "{e}");
        let e = LocalRanks::requested(Some(2), &[], 2, 2, Some("h"), Some(1)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--node-rank 2 with --nnodes 2: machines count from 0"
        );
    }
}
