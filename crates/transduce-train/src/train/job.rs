//! A process's place in a training job: the ranks it joins ([`crate::distributed`]), the
//! device it trains on, how it takes its steps, and whether it resumes its run. What a
//! command line asks for arrives as [`JobOptions`]; the CLI's `train` holds only its flags.

use std::path::Path;
use std::time::Duration;

use transduce::burn::prelude::*;

use crate::backend::Backend;
use crate::distributed::env::{Launch, cuda_device};
use crate::distributed::exchange_mode::{self, Via};
use crate::distributed::{self, Collective, join};
use crate::error::{Error, Result};
use crate::train::config::{RUN_FILE, TrainOptions};
use crate::train::run::checkpoint;

/// How a job's process is placed and steps.
pub struct JobOptions<'a> {
    pub backend: Backend,
    /// The devices listed (`--devices`): one, or one a local rank.
    pub devices: &'a [usize],
    /// Where the ranks sum their gradients.
    pub exchange: Via,
    /// Eager steps asked for (`--eager`), or graphs on any backend (`--graph`).
    pub eager: bool,
    pub graph: bool,
    /// How long a rank waits for another in a collective.
    pub timeout: Duration,
}

/// This process in its job, joined: its ranks' collective (none alone), its device,
/// whether it replays graphs, and whether it leads (rank 0: validation, logs, checkpoints).
pub struct Rank {
    pub collective: Option<Box<dyn Collective>>,
    pub device: Device,
    pub graph: bool,
    pub lead: bool,
}

impl Rank {
    /// Joins the job `launch` describes (none: a process alone), opens this rank's device
    /// and the exchange, and says on stderr which rank runs on what.
    pub fn join(launch: Option<&Launch>, options: &JobOptions<'_>) -> Result<Rank> {
        let collective = join::join(launch, options.timeout)?;
        let lead = collective.as_ref().is_none_or(|c| c.leads());
        let number = device_number(options.backend, options.devices, launch, lead)?;
        let device = options.backend.device_numbered(number)?;
        let graph = replays(options.backend, options.eager, options.graph);
        let collective = exchange_mode::on_device(
            collective,
            options.exchange,
            options.backend,
            (number.unwrap_or(0), graph, lead),
            options.timeout,
        )?;
        let rank = Rank {
            collective,
            device,
            graph,
            lead,
        };
        rank.announce(launch);
        Ok(rank)
    }

    /// Processes in the job.
    pub fn world(&self) -> usize {
        self.collective.as_ref().map_or(1, |c| c.world())
    }

    /// The rank line (each rank's, one write so that ranks' lines do not interleave), or
    /// the device alone; and on rank 0 which restart of a requeued job this is.
    fn announce(&self, launch: Option<&Launch>) {
        let device = &self.device;
        if let (Some(c), Some(launch)) = (&self.collective, launch) {
            let line = format!(
                "rank {} of {} ({}, local rank {}) on {device:?}\n",
                c.rank(),
                c.world(),
                launch.launcher,
                launch.local_rank
            );
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        } else {
            eprintln!("device: {device:?}");
        }
        if !self.lead {
            return;
        }
        for (var, launcher) in [
            ("TORCHELASTIC_RESTART_COUNT", "torchrun"),
            ("SLURM_RESTART_COUNT", "SLURM"),
        ] {
            if let Some(count) = std::env::var(var)
                .ok()
                .filter(|c| c != "0" && !c.is_empty())
            {
                eprintln!("restart {count} of this job ({launcher}, {var})");
            }
        }
    }
}

/// The device number a rank trains on: its LOCAL_RANK's in a job (on CUDA among those
/// CUDA_VISIBLE_DEVICES leaves visible), or the LOCAL_RANK-th of several listed; alone,
/// the one listed (none: the backend's default).
pub fn device_number(
    backend: Backend,
    devices: &[usize],
    launch: Option<&Launch>,
    lead: bool,
) -> Result<Option<usize>> {
    Ok(match (launch, devices) {
        (Some(launch), []) if backend == Backend::Cuda => Some(cuda_device(
            launch.local_rank,
            std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref(),
        )?),
        (Some(launch), []) if backend == Backend::Wgpu => {
            if std::env::var_os("CUDA_VISIBLE_DEVICES").is_some() && lead {
                eprintln!(
                    "wgpu numbers its own adapters: CUDA_VISIBLE_DEVICES is not read (rank r \
                     takes adapter LOCAL_RANK; --devices picks others)"
                );
            }
            Some(launch.local_rank)
        }
        (Some(launch), listed) if listed.len() > 1 => {
            let id = listed.get(launch.local_rank).ok_or_else(|| {
                Error::Usage(format!(
                    "--devices lists {} devices, but this is local rank {}: list one per rank on this machine",
                    listed.len(),
                    launch.local_rank
                ))
            })?;
            Some(*id)
        }
        (_, listed) => listed.first().copied(),
    })
}

/// Whether a run's steps are captured and replayed: by default on the GPU backends, never
/// with `--eager`, on any backend with `--graph` (the CPU then runs the same steps eagerly).
pub fn replays(backend: Backend, eager: bool, graph: bool) -> bool {
    graph || (!eager && matches!(backend, Backend::Wgpu | Backend::Cuda))
}

/// Whether to start a run or continue one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    /// A new run: its folder must hold no checkpoint.
    No,
    /// Continue from the newest checkpoint, which must be there.
    Yes,
    /// Continue if a checkpoint is there, else start (what a launcher that restarts a rank
    /// needs: the same command every time). Rank 0's folder decides for every rank.
    Auto,
}

/// Whether the run in `out` resumes: `Auto` looks for a checkpoint (on rank 0, agreed by
/// all); `Yes` with `init` is refused, since `init` starts a new run.
pub fn resumes(resume: Resume, init: bool, out: &Path, rank: &Rank) -> Result<bool> {
    match resume {
        Resume::No => Ok(false),
        Resume::Yes if init => Err(Error::Usage(
            "--init starts a new run and --resume continues one: pass one of them \
             (or --resume auto, which uses --init only when it starts the run)"
                .into(),
        )),
        Resume::Yes => Ok(true),
        Resume::Auto => {
            let found =
                rank.lead && out.join(RUN_FILE).exists() && !checkpoint::list(out)?.is_empty();
            let found = match rank.collective.as_deref() {
                Some(c) => distributed::agree(c, found)?,
                None => found,
            };
            if rank.lead {
                eprintln!(
                    "--resume auto: {}",
                    if found {
                        "a checkpoint is there: resuming"
                    } else {
                        "no checkpoint yet: starting a new run"
                    }
                );
            }
            Ok(found)
        }
    }
}

/// A run resumed by another number of ranks than it was trained with keeps its batches per
/// step (`accum × world`, the step's data and dropout) by taking `--accum` from them, so
/// it continues as it would have; a world size that cannot share them evenly is refused.
pub fn keep_step_batches(options: &mut TrainOptions, world: usize, lead: bool) -> Result<()> {
    if options.world == world {
        return Ok(());
    }
    let batches = options.accum.max(1) * options.world;
    if !batches.is_multiple_of(world) {
        return Err(Error::Usage(format!(
            "this run takes {batches} batches a step ({} rank(s) × --accum {}); {world} ranks cannot share them evenly: resume it with a number of ranks that divides {batches}",
            options.world, options.accum
        )));
    }
    let accum = batches / world;
    if lead {
        eprintln!(
            "resuming a run of {} rank(s) × --accum {} as {world} rank(s) × --accum {accum}: the same {batches} batches a step",
            options.world, options.accum
        );
    }
    options.accum = accum;
    options.world = world;
    Ok(())
}
