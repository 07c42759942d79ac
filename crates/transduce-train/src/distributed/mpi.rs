//! [`Collective`] through MPI (rsmpi over Open MPI): `mpirun -n N transduce train …`, or
//! `srun` where SLURM starts Open MPI programs. MPI's default error handler on the world
//! communicator is fatal, so a failed collective ends the job rather than returning.
//!
//! MPI has no timeout of its own: a watchdog thread ends the process, with one line, when
//! a collective has waited longer than the collective timeout (a rank alive but silent);
//! the launcher then ends the job. MPI counts are 32-bit, so buffers longer than
//! `i32::MAX` elements travel in pieces (`TRANSDUCE_MPI_CHUNK` sets a smaller piece, for
//! tests).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    /// The collective under way and when it began, for the watchdog.
    waiting: Arc<Mutex<Option<(&'static str, Instant)>>>,
    /// Elements per MPI call.
    chunk: usize,
}

/// The most elements one MPI call takes (its counts are `int`).
const MAX_CHUNK: usize = i32::MAX as usize;

impl MpiWorld {
    /// Initializes MPI (once per process), with a watchdog that ends the process when a
    /// collective waits longer than `timeout`.
    pub fn init(timeout: Duration) -> Result<MpiWorld> {
        let universe = mpi::initialize().ok_or_else(|| {
            CliError::Usage("MPI could not be initialized (was it initialized before?)".into())
        })?;
        let world = universe.world();
        let chunk = match std::env::var("TRANSDUCE_MPI_CHUNK") {
            Err(_) => MAX_CHUNK,
            Ok(value) => value
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|&n| (1..=MAX_CHUNK).contains(&n))
                .ok_or_else(|| {
                    CliError::Usage(format!(
                        "TRANSDUCE_MPI_CHUNK={value:?}: expected a count of elements in 1..={MAX_CHUNK}"
                    ))
                })?,
        };
        let waiting = Arc::new(Mutex::new(None));
        watch(
            world.rank() as usize,
            world.size() as usize,
            timeout,
            &waiting,
        );
        Ok(MpiWorld {
            world,
            _universe: universe,
            waiting,
            chunk,
        })
    }

    /// Runs `body` as the collective `op`, under the watchdog.
    fn watched<T>(&self, op: &'static str, body: impl FnOnce() -> T) -> T {
        let set = |v| *self.waiting.lock().unwrap_or_else(|e| e.into_inner()) = v;
        set(Some((op, Instant::now())));
        let out = body();
        set(None);
        out
    }
}

/// The watchdog: once a second, whether the collective under way has waited longer than
/// `timeout`; if so, one line and the end of this process (MPI cannot cancel a
/// collective; `mpirun` or `srun` then stops the other ranks).
fn watch(
    rank: usize,
    world: usize,
    timeout: Duration,
    waiting: &Arc<Mutex<Option<(&'static str, Instant)>>>,
) {
    let waiting = Arc::downgrade(waiting);
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(250).min(timeout));
            let Some(waiting) = waiting.upgrade() else {
                return;
            };
            let state = *waiting.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((op, since)) = state
                && since.elapsed() >= timeout
            {
                let line = format!(
                    "error: rank {rank} waited {} s in {op} through MPI: a rank of the {world} is alive but silent (stopped, swapped out, or stuck on its device); stopping the job (--collective-timeout sets the wait)\n",
                    super::seconds(timeout)
                );
                let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
                // Not `exit`: MPI's exit handlers would wait on the collective under way.
                // SAFETY: ends the process at once; nothing is left to clean up.
                unsafe { libc::_exit(1) };
            }
        }
    });
}

/// The ranges of a buffer of `len` elements in pieces of at most `chunk`; one empty range
/// for an empty buffer is not needed (MPI refuses a dangling pointer even for 0).
fn pieces(len: usize, chunk: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    (0..len)
        .step_by(chunk)
        .map(move |start| start..(start + chunk).min(len))
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
        self.watched("a sum over the ranks", || {
            for range in pieces(values.len(), self.chunk) {
                self.world.all_reduce_into(
                    &send[range.clone()],
                    &mut values[range],
                    mpi::collective::SystemOperation::sum(),
                );
            }
        });
        Ok(())
    }

    fn broadcast(&self, bytes: &mut Vec<u8>) -> Result<()> {
        let root = self.world.process_at_rank(0);
        self.watched("a broadcast from rank 0", || {
            let mut len = bytes.len() as u64;
            root.broadcast_into(&mut len);
            bytes.resize(len as usize, 0);
            // An empty slice's pointer is dangling, which Open MPI refuses even for 0
            // bytes: `pieces` gives none for an empty buffer.
            for range in pieces(bytes.len(), self.chunk) {
                root.broadcast_into(&mut bytes[range]);
            }
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_a_buffer_in_order_and_an_empty_one_not_at_all() {
        let got: Vec<_> = pieces(10, 4).collect();
        assert_eq!(got, vec![0..4, 4..8, 8..10]);
        assert_eq!(pieces(8, 4).collect::<Vec<_>>(), vec![0..4, 4..8]);
        assert_eq!(pieces(0, 4).count(), 0);
        assert_eq!(pieces(3, MAX_CHUNK).collect::<Vec<_>>(), vec![0..3]);
    }
}
