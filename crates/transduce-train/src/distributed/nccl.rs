//! The ranks' gradient sums through NCCL on CUDA: summed in place in device memory, with
//! no host copy, on a stream of NCCL's own.
//!
//! The job's host collective (TCP or MPI) still starts it: rank 0 makes NCCL's unique id
//! and broadcasts it, and every rank joins the communicator with it. cubecl's CUDA stream
//! is not public, so the order between its work and NCCL's is kept by the host: the
//! device is synchronised before the all-reduce (the pack has written the buffer) and the
//! all-reduce is waited for before the update is issued.
//!
//! Faults: while it waits, a rank polls NCCL's asynchronous error and the host
//! collective's links ([`Collective::check_peers`]); a lost peer, an NCCL error or a sum
//! that takes longer than the collective timeout (a silent rank) aborts the communicator
//! (which ends its kernels) and stops the rank with one line. The communicator is made
//! non-blocking and polled the same way while NCCL connects the ranks; a rank silent
//! before that is found by the host collective's broadcast of the id, which has the same
//! timeout.

use std::cell::{Cell, OnceCell};
use std::ffi::c_char;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, CudaStream};
use cudarc::nccl::{result, sys};
use transduce::burn::prelude::*;
use transduce_kernels::address::cuda_buffer;

use super::{Collective, DeviceSums};
use crate::error::{Error, Result};

/// How often a waiting rank looks at the all-reduce, NCCL's errors and its peers.
const POLL: Duration = Duration::from_micros(50);
/// How often a rank looks whether NCCL has connected the ranks (once per job).
const INIT_POLL: Duration = Duration::from_millis(1);

/// NCCL's communicators made non-blocking (`NCCL_COMM_BLOCKING=0`, which NCCL reads when
/// the first one is made), so that a rank waits for the others to connect under the
/// collective timeout instead of inside `ncclCommInitRank` forever. A value the user set
/// is kept. Called first thing in `main`: the environment may only change while no other
/// thread runs.
pub fn non_blocking_communicators() {
    if std::env::var_os("NCCL_COMM_BLOCKING").is_none() {
        // SAFETY: called before any other thread of the process starts.
        unsafe { std::env::set_var("NCCL_COMM_BLOCKING", "0") };
    }
}

/// A job whose gradient sums go through NCCL, its other collectives through `host`.
pub struct NcclJob {
    host: Box<dyn Collective>,
    /// The CUDA device's number.
    ordinal: usize,
    /// Made at the first sum, which every rank reaches together.
    comm: OnceCell<Comm>,
    /// The longest a sum is waited for.
    timeout: Duration,
}

impl NcclJob {
    /// NCCL for the ranks of `host` on CUDA device `ordinal` (after [`NcclJob::loadable`]).
    pub fn new(host: Box<dyn Collective>, ordinal: usize, timeout: Duration) -> Self {
        NcclJob {
            host,
            ordinal,
            comm: OnceCell::new(),
            timeout,
        }
    }

    /// Whether the NCCL library loads (cudarc panics where it does not).
    pub fn loadable() -> Result<()> {
        match crate::backend::library_loads(&["libnccl.so.2", "libnccl.so"]) {
            true => Ok(()),
            false => Err(Error::Usage(
                "NCCL (libnccl.so.2) is not on the library path: install NVIDIA's libnccl2, or put PyTorch's nvidia/nccl/lib in LD_LIBRARY_PATH".into(),
            )),
        }
    }

    fn comm(&self) -> Result<&Comm> {
        if let Some(comm) = self.comm.get() {
            return Ok(comm);
        }
        let comm = Comm::join(&*self.host, self.ordinal, self.timeout)?;
        Ok(self.comm.get_or_init(|| comm))
    }
}

impl Collective for NcclJob {
    fn rank(&self) -> usize {
        self.host.rank()
    }
    fn world(&self) -> usize {
        self.host.world()
    }
    fn all_reduce_sum(&self, values: &mut [f32]) -> Result<()> {
        self.host.all_reduce_sum(values)
    }
    fn broadcast(&self, bytes: &mut Vec<u8>) -> Result<()> {
        self.host.broadcast(bytes)
    }
    fn check_peers(&self) -> Result<()> {
        self.host.check_peers()
    }
    fn device_sums(&self) -> Option<&dyn DeviceSums> {
        Some(self)
    }
}

impl DeviceSums for NcclJob {
    fn all_reduce_in_place(&self, values: &Tensor<1>) -> Result<()> {
        let comm = self.comm()?;
        // The pack's writes first: they are on cubecl's stream, which NCCL's does not see.
        values.device().sync().map_err(|e| {
            Error::Usage(format!("the device failed before the gradient sums: {e:?}"))
        })?;
        let buffer = cuda_buffer(values).map_err(|e| Error::Usage(format!("NCCL: {e}")))?;
        comm.context.bind_to_thread().map_err(cuda_error)?;
        let address = buffer.address as *mut std::ffi::c_void;
        // SAFETY: `buffer` holds `len` f32 values on this communicator's device and stays
        // allocated until the all-reduce is waited for below.
        unsafe {
            result::all_reduce(
                address,
                address,
                buffer.len,
                sys::ncclDataType_t::ncclFloat32,
                sys::ncclRedOp_t::ncclSum,
                comm.comm,
                comm.stream.cu_stream() as sys::cudaStream_t,
            )
        }
        .map_err(|e| comm.failed(&format!("the all-reduce did not start: {e:?}")))?;
        comm.wait(&*self.host, self.timeout)?;
        drop(buffer);
        Ok(())
    }
}

/// An NCCL communicator, its device's context and its stream.
struct Comm {
    comm: sys::ncclComm_t,
    /// Aborted after a fault: not to be destroyed again.
    aborted: Cell<bool>,
    context: Arc<CudaContext>,
    stream: Arc<CudaStream>,
}

impl Comm {
    /// Every rank of `host` joins one communicator on CUDA device `ordinal`: rank 0's
    /// unique id, broadcast over the host collective; the ranks are connected when this
    /// returns, or a rank waited `timeout` for a silent one.
    fn join(host: &dyn Collective, ordinal: usize, timeout: Duration) -> Result<Comm> {
        let context = CudaContext::new(ordinal).map_err(cuda_error)?;
        context.bind_to_thread().map_err(cuda_error)?;
        let mut id = match host.leads() {
            true => {
                let id = result::get_uniqueid().map_err(|e| nccl_error("ncclGetUniqueId", e))?;
                id.internal.iter().map(|&c| c as u8).collect()
            }
            false => Vec::new(),
        };
        host.broadcast(&mut id)?;
        let mut internal = [0 as c_char; 128];
        if id.len() != internal.len() {
            return Err(Error::Usage(format!(
                "NCCL: rank 0 sent an id of {} bytes, not {}",
                id.len(),
                internal.len()
            )));
        }
        for (to, from) in internal.iter_mut().zip(&id) {
            *to = *from as c_char;
        }
        let mut comm = std::ptr::null_mut();
        // SAFETY: `comm` receives the communicator; every rank passes the same id. The
        // communicator is non-blocking ([`non_blocking_communicators`]): the call may
        // return while NCCL still connects the ranks, which `ready` waits for.
        unsafe {
            result::comm_init_rank(
                &mut comm,
                host.world() as i32,
                sys::ncclUniqueId { internal },
                host.rank() as i32,
            )
        }
        .map_err(|e| {
            // NCCL refuses two ranks of one communicator on one GPU.
            Error::Usage(format!(
                "NCCL: ncclCommInitRank failed ({:?}); NCCL takes one GPU per rank (ranks sharing a GPU need --exchange host); NCCL_DEBUG=INFO says why",
                e.0
            ))
        })?;
        let stream = context.new_stream().map_err(cuda_error)?;
        let comm = Comm {
            comm,
            aborted: Cell::new(false),
            context,
            stream,
        };
        comm.ready(host, timeout)?;
        Ok(comm)
    }

    /// Waits until NCCL has connected the ranks, polling its state and the host's links,
    /// for at most `timeout`: a rank silent while the others connect (stopped before its
    /// `ncclCommInitRank`) is named as in a sum, and the communicator is aborted.
    fn ready(&self, host: &dyn Collective, timeout: Duration) -> Result<()> {
        let started = Instant::now();
        let mut next_check = started;
        loop {
            match self.state()? {
                sys::ncclResult_t::ncclSuccess => return Ok(()),
                sys::ncclResult_t::ncclInProgress => {}
                state => {
                    return Err(self.failed(&format!(
                        "ncclCommInitRank: NCCL reports {state:?}; NCCL takes one GPU per rank (ranks sharing a GPU need --exchange host)"
                    )));
                }
            }
            if Instant::now() >= next_check {
                self.peers_and_clock(host, started, timeout, "NCCL's communicator")?;
                next_check = Instant::now() + Duration::from_secs(1);
            }
            std::thread::sleep(INIT_POLL);
        }
    }

    /// NCCL's asynchronous state of the communicator: `ncclInProgress` while an
    /// operation is still being set up, an error after a fault.
    fn state(&self) -> Result<sys::ncclResult_t> {
        let mut state = sys::ncclResult_t::ncclSuccess;
        // SAFETY: a live communicator; `state` receives its error.
        unsafe { sys::ncclCommGetAsyncError(self.comm, &mut state) }
            .result()
            .map_err(|e| self.failed(&format!("ncclCommGetAsyncError: {e:?}")))?;
        Ok(state)
    }

    /// The once-a-second checks of a wait: a lost peer, or a wait past `timeout` for
    /// `what`; either aborts the communicator.
    fn peers_and_clock(
        &self,
        host: &dyn Collective,
        started: Instant,
        timeout: Duration,
        what: &str,
    ) -> Result<()> {
        if let Err(lost) = host.check_peers() {
            let _ = self.failed("");
            return Err(lost);
        }
        if started.elapsed() >= timeout {
            return Err(self.failed(&format!(
                "rank {} waited {} s for {what}: a rank is alive but silent (stopped, \
                 swapped out, or stuck on its device) (--collective-timeout sets the wait)",
                host.rank(),
                super::seconds(timeout)
            )));
        }
        Ok(())
    }

    /// Waits for the work on NCCL's stream, polling NCCL's asynchronous error and the
    /// host's links, for at most `timeout`; a fault aborts the communicator.
    fn wait(&self, host: &dyn Collective, timeout: Duration) -> Result<()> {
        let started = Instant::now();
        let mut next_check = started;
        loop {
            // A non-blocking communicator may still be enqueuing the all-reduce
            // (`ncclInProgress`): the stream says nothing until it is enqueued.
            match self.state()? {
                sys::ncclResult_t::ncclSuccess => {
                    // SAFETY: the stream is this communicator's own, alive while `self` is.
                    match unsafe { cudarc::driver::sys::cuStreamQuery(self.stream.cu_stream()) } {
                        cudarc::driver::sys::CUresult::CUDA_SUCCESS => return Ok(()),
                        cudarc::driver::sys::CUresult::CUDA_ERROR_NOT_READY => {}
                        e => return Err(self.failed(&format!("the all-reduce's stream: {e:?}"))),
                    }
                }
                sys::ncclResult_t::ncclInProgress => {}
                state => return Err(self.failed(&format!("NCCL reports {state:?}"))),
            }
            // The host links cost a system call: once a second is enough.
            if Instant::now() >= next_check {
                self.peers_and_clock(host, started, timeout, "the all-reduce")?;
                next_check = Instant::now() + Duration::from_secs(1);
            }
            std::thread::sleep(POLL);
        }
    }

    /// Aborts the communicator (its kernels end) and says what failed.
    fn failed(&self, what: &str) -> Error {
        if !self.aborted.replace(true) {
            // SAFETY: a live communicator, not used again: the rank stops.
            let _ = unsafe { result::comm_abort(self.comm) };
        }
        Error::Usage(format!(
            "NCCL: {what}; stopping this rank (NCCL_DEBUG=WARN says more; the last checkpoint resumes the run)"
        ))
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        if !self.aborted.get() {
            // SAFETY: the communicator is not used after this; a failure leaves nothing
            // to do.
            let _ = unsafe { result::comm_destroy(self.comm) };
        }
    }
}

fn cuda_error(e: cudarc::driver::DriverError) -> Error {
    Error::Usage(format!("NCCL: CUDA: {e:?}"))
}

fn nccl_error(call: &str, e: result::NcclError) -> Error {
    Error::Usage(format!(
        "NCCL: {call} failed ({:?}); NCCL_DEBUG=INFO says why",
        e.0
    ))
}
