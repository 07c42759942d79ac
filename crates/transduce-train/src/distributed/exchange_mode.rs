//! Where a job's gradient sums are formed (`train --exchange`): through host buffers (the
//! job's TCP or MPI collective), or on CUDA in device memory through NCCL.

use std::time::Duration;

use clap::ValueEnum;

use super::{Alone, Collective};
use crate::backend::Backend;
use crate::error::{Error, Result};

/// `train --exchange`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Via {
    /// NCCL for the replayed steps of a job of several ranks on CUDA when the NCCL library
    /// loads; host buffers otherwise.
    #[default]
    Auto,
    /// Host buffers, through the job's TCP or MPI collective.
    Host,
    /// NCCL, in device memory (CUDA, replayed steps). A single process takes the ranks'
    /// path as a job of one, to measure what the exchange costs.
    Nccl,
}

/// The collective a job's steps use: `collective` itself, or NCCL for its sums on CUDA
/// device `ordinal` (`graph`: the steps are replayed, the path NCCL serves). `lead` says
/// the one line of a fallback; NCCL's sums wait at most `timeout` (`--collective-timeout`).
pub fn on_device(
    collective: Option<Box<dyn Collective>>,
    via: Via,
    backend: Backend,
    (ordinal, graph, lead): (usize, bool, bool),
    timeout: Duration,
) -> Result<Option<Box<dyn Collective>>> {
    let ranks = collective.as_ref().map_or(1, |c| c.world());
    match via {
        Via::Host => Ok(collective),
        Via::Auto if backend != Backend::Cuda || ranks == 1 || !graph => Ok(collective),
        Via::Auto => match nccl(collective_or_alone(collective), ordinal, timeout) {
            Ok(job) => Ok(Some(job)),
            Err((host, why)) => {
                if lead {
                    eprintln!("exchange: through host buffers: {why}");
                }
                Ok(Some(host))
            }
        },
        Via::Nccl if backend != Backend::Cuda => Err(Error::Usage(format!(
            "--exchange nccl: NCCL sums CUDA memory, and this run is on {backend:?}: use --backend cuda, or --exchange host"
        ))),
        Via::Nccl if !graph => Err(Error::Usage(
            "--exchange nccl sums the replayed steps' gradients, and this run steps eagerly (--eager): drop --eager, or use --exchange host".into(),
        )),
        Via::Nccl => nccl(collective_or_alone(collective), ordinal, timeout)
            .map(Some)
            .map_err(|(_, why)| Error::Usage(format!("--exchange nccl: {why}"))),
    }
}

fn collective_or_alone(collective: Option<Box<dyn Collective>>) -> Box<dyn Collective> {
    collective.unwrap_or_else(|| Box::new(Alone))
}

/// `host` with NCCL for its sums, or `host` back and why not.
#[cfg(feature = "cuda")]
fn nccl(
    host: Box<dyn Collective>,
    ordinal: usize,
    timeout: Duration,
) -> std::result::Result<Box<dyn Collective>, (Box<dyn Collective>, String)> {
    use super::nccl::NcclJob;
    if let Err(e) = NcclJob::loadable() {
        return Err((host, e.to_string()));
    }
    Ok(Box::new(NcclJob::new(host, ordinal, timeout)))
}

#[cfg(not(feature = "cuda"))]
fn nccl(
    host: Box<dyn Collective>,
    _ordinal: usize,
    _timeout: Duration,
) -> std::result::Result<Box<dyn Collective>, (Box<dyn Collective>, String)> {
    Err((
        host,
        "this transduce was built without CUDA (--features cuda), and so without NCCL".into(),
    ))
}
