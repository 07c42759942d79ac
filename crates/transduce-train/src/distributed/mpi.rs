//! [`Collective`] through MPI: `mpirun -n N transduce train …`, or `srun` where SLURM
//! starts MPI programs. The MPI library is loaded when a job asks for it, as NCCL is: no
//! build feature, no MPI headers or libclang at build time, one binary for every machine.
//!
//! Two ABIs cover the MPIs clusters run: Open MPI's (`libmpi.so.40`; its handles are the
//! addresses of the library's predefined objects) and MPICH's, shared by Intel MPI,
//! MVAPICH and Cray MPICH (`libmpi.so.12`; its handles are fixed integers from `mpi.h`).
//! The library says which it is (`ompi_mpi_comm_world`, or `MPI_Get_library_version`).
//! `TRANSDUCE_MPI_LIB` names the library where it is not on the loader's path.
//!
//! MPI's default error handler on the world communicator is fatal, so a failed collective
//! ends the job rather than returning. MPI has no timeout of its own: a watchdog thread
//! ends the process, with one line, when a collective has waited longer than the
//! collective timeout (a rank alive but silent); the launcher then ends the job, as it
//! does when a rank dies. MPI counts are 32-bit, so buffers longer than `i32::MAX`
//! elements travel in pieces (`TRANSDUCE_MPI_CHUNK` sets a smaller piece, for tests).

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};

use super::Collective;
use super::env::Launcher;
use crate::error::{Error, Result};

/// The MPI world of this process; MPI is finalized when it is dropped.
pub struct MpiWorld {
    mpi: Box<dyn Calls>,
    rank: usize,
    world: usize,
    /// The collective under way and when it began, for the watchdog.
    waiting: Arc<Mutex<Option<(&'static str, Instant)>>>,
    /// Elements per MPI call.
    chunk: usize,
    /// The length of sums every rank was found to agree on (the peer check).
    agreed: Cell<Option<usize>>,
}

/// The most elements one MPI call takes (its counts are `int`).
const MAX_CHUNK: usize = i32::MAX as usize;

/// Open MPI's library (≥ 3.0).
const OPEN_MPI: [&str; 1] = ["libmpi.so.40"];
/// MPICH's ABI (Debian names it `libmpich.so.12`; Intel MPI and MVAPICH `libmpi.so.12`).
const MPICH: [&str; 2] = ["libmpi.so.12", "libmpich.so.12"];

/// The libraries tried, in order, unless `TRANSDUCE_MPI_LIB` names one: the launcher's own
/// MPI first (a rank of MPICH's `mpiexec` that loaded Open MPI would start alone), then
/// the other, then the development link.
fn libraries(launcher: Launcher) -> Vec<&'static str> {
    let (first, second): (&[&str], &[&str]) = match launcher {
        Launcher::Mpich => (&MPICH, &OPEN_MPI),
        _ => (&OPEN_MPI, &MPICH),
    };
    [first, second, &["libmpi.so"]].concat()
}

/// An Open MPI handle: the address of one of the library's predefined objects.
#[derive(Clone, Copy)]
#[repr(transparent)]
struct Address(*const c_void);
// SAFETY: the predefined objects live as long as the (never unloaded) library and are
// only ever passed back to it.
unsafe impl Send for Address {}
unsafe impl Sync for Address {}

/// MPI's calls over handles of type `H` (`Address` in Open MPI, `c_int` in MPICH).
struct Api<H> {
    init: unsafe extern "C" fn(*mut c_int, *mut *mut *mut c_char) -> c_int,
    finalize: unsafe extern "C" fn() -> c_int,
    comm_rank: unsafe extern "C" fn(H, *mut c_int) -> c_int,
    comm_size: unsafe extern "C" fn(H, *mut c_int) -> c_int,
    allreduce: unsafe extern "C" fn(*const c_void, *mut c_void, c_int, H, H, H) -> c_int,
    bcast: unsafe extern "C" fn(*mut c_void, c_int, H, c_int, H) -> c_int,
    comm_world: H,
    float: H,
    byte: H,
    sum: H,
}

impl<H> Api<H> {
    /// MPI's functions in `library`, with the ABI's handles of the world communicator,
    /// `MPI_FLOAT` and `MPI_BYTE`, and `MPI_SUM`.
    ///
    /// # Safety
    /// `H` must be the library's handle type (each function pointer is read as the C
    /// signature of that MPI function over `H`).
    unsafe fn bind(
        library: &Library,
        file: &str,
        [comm_world, float, byte]: [H; 3],
        sum: H,
    ) -> Result<Self> {
        // SAFETY: as the caller promises.
        unsafe {
            Ok(Api {
                init: symbol(library, "MPI_Init", file)?,
                finalize: symbol(library, "MPI_Finalize", file)?,
                comm_rank: symbol(library, "MPI_Comm_rank", file)?,
                comm_size: symbol(library, "MPI_Comm_size", file)?,
                allreduce: symbol(library, "MPI_Allreduce", file)?,
                bcast: symbol(library, "MPI_Bcast", file)?,
                comm_world,
                float,
                byte,
                sum,
            })
        }
    }
}

/// What the trainer asks of MPI, whatever its ABI. Each returns MPI's error code.
trait Calls: Send + Sync {
    fn init(&self) -> c_int;
    fn finalize(&self) -> c_int;
    fn rank_and_size(&self) -> (c_int, c_int, c_int);
    /// Sums `send` over the ranks into `recv` (`send.len() == recv.len() ≤ i32::MAX`).
    fn sum(&self, send: &[f32], recv: &mut [f32]) -> c_int;
    /// Rank 0's `bytes` to every rank (`bytes.len() ≤ i32::MAX`, not empty).
    fn broadcast(&self, bytes: &mut [u8]) -> c_int;
}

impl<H: Copy + Send + Sync> Calls for Api<H> {
    fn init(&self) -> c_int {
        // SAFETY: MPI_Init accepts null argc/argv (MPI-2).
        unsafe { (self.init)(std::ptr::null_mut(), std::ptr::null_mut()) }
    }
    fn finalize(&self) -> c_int {
        // SAFETY: called once, after MPI_Init, when the world is dropped.
        unsafe { (self.finalize)() }
    }
    fn rank_and_size(&self) -> (c_int, c_int, c_int) {
        let (mut rank, mut size) = (0, 0);
        // SAFETY: both outputs are valid ints; the world communicator is predefined.
        let code = unsafe {
            (self.comm_rank)(self.comm_world, &mut rank)
                | (self.comm_size)(self.comm_world, &mut size)
        };
        (code, rank, size)
    }
    fn sum(&self, send: &[f32], recv: &mut [f32]) -> c_int {
        debug_assert!(send.len() == recv.len() && send.len() <= MAX_CHUNK);
        // SAFETY: both buffers hold `len` f32 values and do not overlap.
        unsafe {
            (self.allreduce)(
                send.as_ptr().cast(),
                recv.as_mut_ptr().cast(),
                send.len() as c_int,
                self.float,
                self.sum,
                self.comm_world,
            )
        }
    }
    fn broadcast(&self, bytes: &mut [u8]) -> c_int {
        debug_assert!(!bytes.is_empty() && bytes.len() <= MAX_CHUNK);
        // SAFETY: the buffer holds `len` bytes; an empty slice's pointer is dangling, which
        // Open MPI refuses even for 0 bytes, and the callers never pass one.
        unsafe {
            (self.bcast)(
                bytes.as_mut_ptr().cast(),
                bytes.len() as c_int,
                self.byte,
                0,
                self.comm_world,
            )
        }
    }
}

/// MPICH's handles, fixed by its `mpi.h` (and by Intel MPI's, MVAPICH's, Cray's).
mod mpich {
    use std::ffi::c_int;
    pub const COMM_WORLD: c_int = 0x4400_0000;
    pub const FLOAT: c_int = 0x4c00_040a;
    pub const BYTE: c_int = 0x4c00_010d;
    pub const SUM: c_int = 0x5800_0003;
}

/// The MPI library, loaded for good: MPI cannot be initialized twice in a process, and
/// unloading Open MPI after MPI_Finalize is not safe.
fn load(launcher: Launcher) -> std::result::Result<(&'static Library, String), String> {
    load_named(launcher, std::env::var("TRANSDUCE_MPI_LIB").ok())
}

/// [`load`], trying `named` alone when it is given.
fn load_named(
    launcher: Launcher,
    named: Option<String>,
) -> std::result::Result<(&'static Library, String), String> {
    let candidates: Vec<&str> = match &named {
        Some(path) => vec![path.as_str()],
        None => libraries(launcher),
    };
    let mut why = Vec::new();
    for name in &candidates {
        // RTLD_GLOBAL: Open MPI's components, which it loads itself, resolve its symbols
        // through the global scope.
        // SAFETY: loading a library runs its initialisers; MPI's have no preconditions.
        match unsafe { Library::open(Some(name), RTLD_NOW | RTLD_GLOBAL) } {
            Ok(library) => return Ok((Box::leak(Box::new(library)), name.to_string())),
            Err(e) => why.push(e.to_string()),
        }
    }
    Err(match named {
        Some(path) => format!(
            "TRANSDUCE_MPI_LIB={path:?} does not load: {}",
            why.join("; ")
        ),
        None => format!(
            "no MPI library loads here (tried {}): install Open MPI (Debian: openmpi-bin) or MPICH, or set TRANSDUCE_MPI_LIB to its libmpi.so",
            candidates.join(", ")
        ),
    })
}

/// `name` in `library`, as a value of type `T` (a function pointer or an address).
///
/// # Safety
/// `T` must be the symbol's type: a function pointer of its C signature, or a pointer.
unsafe fn symbol<T: Copy>(library: &Library, name: &str, file: &str) -> Result<T> {
    // SAFETY: as the caller promises.
    unsafe { library.get::<T>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|_| Error::Usage(format!("{file} has no {name}: is it an MPI library?")))
}

/// The version string the library reports (MPI-3's `MPI_Get_library_version`).
fn library_version(library: &Library, file: &str) -> Result<String> {
    type Version = unsafe extern "C" fn(*mut c_char, *mut c_int) -> c_int;
    // SAFETY: MPI_Get_library_version's signature; it may be called before MPI_Init.
    let get: Version = unsafe { symbol(library, "MPI_Get_library_version", file)? };
    // MPICH's MPI_MAX_LIBRARY_VERSION_STRING is 8192, Open MPI's 256.
    let mut text = vec![0u8; 8192];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds the longest string either ABI writes.
    unsafe { get(text.as_mut_ptr().cast(), &mut len) };
    text.truncate((len.max(0) as usize).min(text.len()));
    Ok(String::from_utf8_lossy(&text).trim().to_string())
}

/// The calls of the library at hand, by its ABI.
fn bind(library: &'static Library, file: &str) -> Result<Box<dyn Calls>> {
    // SAFETY: each branch binds the functions over its ABI's handle type (`Address` for
    // Open MPI, `c_int` for MPICH), and each object's symbol is read as its address.
    unsafe {
        let world: std::result::Result<libloading::os::unix::Symbol<*const c_void>, _> =
            library.get(b"ompi_mpi_comm_world");
        if let Ok(world) = world {
            let address = |name: &str| -> Result<Address> {
                let s: libloading::os::unix::Symbol<*const c_void> =
                    library
                        .get(name.as_bytes())
                        .map_err(|_| Error::Usage(format!("{file} (Open MPI) has no {name}")))?;
                Ok(Address(s.into_raw() as *const c_void))
            };
            let world = Address(world.into_raw() as *const c_void);
            let handles = [world, address("ompi_mpi_float")?, address("ompi_mpi_byte")?];
            return Ok(Box::new(Api::bind(
                library,
                file,
                handles,
                address("ompi_mpi_op_sum")?,
            )?));
        }
        let version = library_version(library, file)?;
        if !mpich_abi(&version) {
            return Err(Error::Usage(format!(
                "{file} is neither Open MPI nor of MPICH's ABI (it says {version:?}): set TRANSDUCE_MPI_LIB to an Open MPI or MPICH libmpi.so"
            )));
        }
        let handles = [mpich::COMM_WORLD, mpich::FLOAT, mpich::BYTE];
        Ok(Box::new(Api::bind(library, file, handles, mpich::SUM)?))
    }
}

/// Whether a library of this version string uses MPICH's handles.
fn mpich_abi(version: &str) -> bool {
    let upper = version.to_ascii_uppercase();
    ["MPICH", "INTEL(R) MPI", "MVAPICH"]
        .iter()
        .any(|name| upper.contains(name))
}

impl MpiWorld {
    /// Loads MPI (the `launcher`'s first) and initializes it (once per process), with a
    /// watchdog that ends the process when a collective waits longer than `timeout`.
    /// `Err(Unavailable::NoLibrary)` where no MPI library loads, so the caller can say
    /// what to install or use TCP instead.
    pub fn init(
        launcher: Launcher,
        timeout: Duration,
    ) -> std::result::Result<MpiWorld, Unavailable> {
        let (library, file) = load(launcher).map_err(Unavailable::NoLibrary)?;
        let mpi = bind(library, &file).map_err(Unavailable::Failed)?;
        let failed = |what: &str, code: c_int| {
            Unavailable::Failed(Error::Usage(format!(
                "{what} failed in {file} (MPI error {code})"
            )))
        };
        let code = mpi.init();
        if code != 0 {
            return Err(failed("MPI_Init", code));
        }
        let (code, rank, size) = mpi.rank_and_size();
        if code != 0 || rank < 0 || size < 1 {
            return Err(failed("MPI_Comm_rank or MPI_Comm_size", code));
        }
        let chunk = chunk().map_err(Unavailable::Failed)?;
        let waiting = Arc::new(Mutex::new(None));
        watch(rank as usize, size as usize, timeout, &waiting);
        Ok(MpiWorld {
            mpi,
            rank: rank as usize,
            world: size as usize,
            waiting,
            chunk,
            agreed: Cell::new(None),
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

    /// MPI's error code as this rank's error.
    fn check(&self, op: &str, code: c_int) -> Result<()> {
        match code {
            0 => Ok(()),
            code => Err(Error::Usage(format!(
                "rank {}: {op} through MPI failed (MPI error {code})",
                self.rank
            ))),
        }
    }

    /// The peer check: before the first sum of `len` values, every rank learns whether
    /// all have `len` (MPI's sum of unequal counts is undefined: it may hang or corrupt),
    /// and every rank stops with one line if not.
    fn agree_on(&self, len: usize) -> Result<()> {
        if self.agreed.get() == Some(len) {
            return Ok(());
        }
        let mut lead = (len as u64).to_le_bytes().to_vec();
        self.broadcast(&mut lead)?;
        let lead = u64::from_le_bytes(lead.try_into().unwrap_or([0; 8]));
        let differs = [(lead != len as u64) as u8 as f32];
        let mut count = [0f32];
        let code = self.watched("the ranks' check of their gradients' length", || {
            self.mpi.sum(&differs, &mut count)
        });
        self.check("the check of the gradients' length", code)?;
        if count[0] > 0.0 {
            return Err(Error::Usage(match differs[0] > 0.0 {
                true => format!(
                    "rank {} has {len} gradient values where rank 0 has {lead}: do the ranks train the same model?",
                    self.rank
                ),
                false => format!(
                    "rank {}: {} rank(s) have other than the {len} gradient values of this one: do the ranks train the same model?",
                    self.rank, count[0]
                ),
            }));
        }
        self.agreed.set(Some(len));
        Ok(())
    }
}

impl Drop for MpiWorld {
    fn drop(&mut self) {
        let _ = self.mpi.finalize();
    }
}

/// Why MPI is not there for a job.
pub enum Unavailable {
    /// No MPI library loads (the message says what was tried and what to install).
    NoLibrary(String),
    /// A library loaded but is not MPI, or MPI failed to start.
    Failed(Error),
}

/// Elements per MPI call: `TRANSDUCE_MPI_CHUNK`, or the most MPI takes.
fn chunk() -> Result<usize> {
    match std::env::var("TRANSDUCE_MPI_CHUNK") {
        Err(_) => Ok(MAX_CHUNK),
        Ok(value) => value
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|&n| (1..=MAX_CHUNK).contains(&n))
            .ok_or_else(|| {
                Error::Usage(format!(
                    "TRANSDUCE_MPI_CHUNK={value:?}: expected a count of elements in 1..={MAX_CHUNK}"
                ))
            }),
    }
}

/// The watchdog: four times a second, whether the collective under way has waited longer
/// than `timeout`; if so, one line and the end of this process (MPI cannot cancel a
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

/// The ranges of a buffer of `len` elements in pieces of at most `chunk`; none for an
/// empty buffer (MPI refuses a dangling pointer even for 0).
fn pieces(len: usize, chunk: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    (0..len)
        .step_by(chunk)
        .map(move |start| start..(start + chunk).min(len))
}

impl Collective for MpiWorld {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world(&self) -> usize {
        self.world
    }

    fn all_reduce_sum(&self, values: &mut [f32]) -> Result<()> {
        self.agree_on(values.len())?;
        let send = values.to_vec();
        let code = self.watched("a sum over the ranks", || {
            pieces(values.len(), self.chunk)
                .map(|range| self.mpi.sum(&send[range.clone()], &mut values[range]))
                .find(|&code| code != 0)
                .unwrap_or(0)
        });
        self.check("a sum over the ranks", code)
    }

    fn broadcast(&self, bytes: &mut Vec<u8>) -> Result<()> {
        let code = self.watched("a broadcast from rank 0", || {
            let mut len = (bytes.len() as u64).to_le_bytes();
            let code = self.mpi.broadcast(&mut len);
            if code != 0 {
                return code;
            }
            bytes.resize(u64::from_le_bytes(len) as usize, 0);
            pieces(bytes.len(), self.chunk)
                .map(|range| self.mpi.broadcast(&mut bytes[range]))
                .find(|&code| code != 0)
                .unwrap_or(0)
        });
        self.check("a broadcast from rank 0", code)
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

    #[test]
    fn the_launchers_own_mpi_is_tried_first() {
        assert_eq!(libraries(Launcher::OpenMpi)[0], "libmpi.so.40");
        assert_eq!(libraries(Launcher::Slurm)[0], "libmpi.so.40");
        assert_eq!(
            libraries(Launcher::Mpich),
            [
                "libmpi.so.12",
                "libmpich.so.12",
                "libmpi.so.40",
                "libmpi.so"
            ]
        );
    }

    #[test]
    fn mpichs_abi_is_told_by_the_version_string() {
        // Strings these libraries report (MPI_Get_library_version).
        assert!(mpich_abi(
            "MPICH Version:      4.0.2\nMPICH Release date: ..."
        ));
        assert!(mpich_abi("Intel(R) MPI Library 2021.10 for Linux* OS"));
        assert!(mpich_abi("MVAPICH2 Version      :\t2.3.7"));
        assert!(mpich_abi("MPI VERSION    : CRAY MPICH version 8.1.27"));
        assert!(!mpich_abi("Open MPI v4.1.4, package: Debian OpenMPI"));
        assert!(!mpich_abi("Microsoft MPI"));
    }

    #[test]
    fn a_named_library_that_does_not_load_is_one_error_naming_it() {
        let err = load_named(Launcher::OpenMpi, Some("/nonexistent/libmpi.so".into()))
            .map(|_| ())
            .unwrap_err();
        assert!(
            err.starts_with("TRANSDUCE_MPI_LIB=\"/nonexistent/libmpi.so\" does not load"),
            "{err}"
        );
    }
}
