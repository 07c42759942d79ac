//! [`Collective`] over TCP, for ranks started torchrun's way (`RANK`, `WORLD_SIZE`,
//! `MASTER_ADDR`, `MASTER_PORT`: torchrun itself, `train --nproc-per-node`, or any
//! launcher that sets them). No MPI is needed: rank 0 listens at the master's port and
//! every other rank connects to it, so the job is a star with rank 0 at its centre.
//!
//! Rank 0 sums: it reads the other ranks' values in rank order and adds them to its own
//! one after another, then sends the sums back. The order is fixed, so a rerun gives the
//! same bits, and two ranks give `a + b` exactly as one process accumulating two batches
//! does. A star moves `2 (world − 1)` copies of the buffer through rank 0 per step, which
//! suits the host buffers of CPU and wgpu training on a few ranks; NCCL's rings are the
//! GPUs' engine at scale (docs/TRAINING.md, "Many GPUs, many machines").
//!
//! Faults end the job, never hang it: a rank that exits closes its connection, and the
//! ranks reading from it stop with one line naming it; the rank 0 that stops closes every
//! connection in turn. A network that fails silently is found by TCP keep-alive probes and
//! a bound on unacknowledged sends (`TCP_USER_TIMEOUT`), both about 45 s. A rank that is
//! alive but silent (stopped, swapped out, stuck in a driver) is found by the collective
//! timeout (`train --collective-timeout`, 600 s as NCCL's watchdog): no read or write of a
//! collective waits longer. Rank 0, which waits on every rank, names the silent one and
//! tells the others before it stops; they wait a little longer than it does
//! ([`LEAD_FIRST`]), so that the line every rank prints names the rank that went quiet.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use socket2::{SockRef, TcpKeepalive};

use super::Collective;
use crate::error::{Error, Result};

/// What a rank's first message starts with: a stray connection is refused, not misread.
const HELLO: &[u8] = b"transduce-rank-v1";
/// How long ranks wait for each other to start (`TRANSDUCE_JOIN_TIMEOUT`, seconds).
const JOIN_TIMEOUT: Duration = Duration::from_secs(300);
/// Keep-alive: first probe after this much silence, then one per interval, and the
/// connection is dropped after this many unanswered; sends unacknowledged this long fail.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(15);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEPALIVE_PROBES: u32 = 3;
const SEND_TIMEOUT: Duration = Duration::from_secs(45);
/// Ranks other than 0 wait this much longer than rank 0 for rank 0.
const LEAD_FIRST: Duration = Duration::from_secs(5);
/// The length field of rank 0's message that it stops the job; its reason follows as a
/// message of its own. No real message is that long.
const STOP: u64 = u64::MAX;
/// How long rank 0 tries to tell a rank that it stops the job.
const STOP_NOTICE: Duration = Duration::from_secs(1);

/// One rank's end of the job's connections.
pub struct TcpWorld {
    rank: usize,
    world: usize,
    /// Rank 0: one connection per other rank, rank r's at r − 1. Others: rank 0's.
    links: Mutex<Vec<TcpStream>>,
    /// The longest a read or write of a collective waits for its peer.
    wait: Duration,
}

/// Why a message did not arrive.
enum Fault {
    /// The connection failed, closed or stayed silent.
    Io(std::io::Error),
    /// Rank 0 stopped the job, for this reason.
    Stopped(String),
}

impl TcpWorld {
    /// Joins the job: rank 0 listens at `port` (every interface) and waits for the others;
    /// they connect to `addr:port`, retrying while rank 0 is not listening yet. From then
    /// on no collective waits for a peer longer than `timeout` (the others wait
    /// [`LEAD_FIRST`] longer for rank 0).
    pub fn join(
        rank: usize,
        world: usize,
        addr: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<TcpWorld> {
        let join = join_timeout()?;
        let links = if rank == 0 {
            accept_ranks(listen(addr, port)?, world, addr, port, join)?
        } else {
            vec![connect_to_lead(rank, world, addr, port, join)?]
        };
        TcpWorld::joined(rank, world, links, timeout)
    }

    /// Joins a job torchrun started with its agent's store at `store` (`MASTER_ADDR`,
    /// `MASTER_PORT`): rank 0 listens on a port the kernel chooses and sets it under `key`
    /// in the store; the others read it there and connect to rank 0 at `MASTER_ADDR`.
    pub fn join_through_store(
        rank: usize,
        world: usize,
        (addr, store_port): (&str, u16),
        key: &str,
        timeout: Duration,
    ) -> Result<TcpWorld> {
        let join = join_timeout()?;
        let deadline = Instant::now() + join;
        let mut store = super::store::Store::connect(addr, store_port, deadline)?;
        let links = if rank == 0 {
            let listener = listen(addr, 0)?;
            let port = listener
                .local_addr()
                .map_err(|e| Error::Usage(format!("rank 0's port: {e}")))?
                .port();
            store.set(key, port.to_string().as_bytes())?;
            accept_ranks(listener, world, addr, port, join)?
        } else {
            let value = store.get(key, deadline)?;
            let port = std::str::from_utf8(&value)
                .ok()
                .and_then(|v| v.parse::<u16>().ok())
                .ok_or_else(|| {
                    Error::Usage(format!(
                        "torchrun's store holds {:?} under {key:?}, not a port",
                        String::from_utf8_lossy(&value)
                    ))
                })?;
            let left = deadline.saturating_duration_since(Instant::now());
            vec![connect_to_lead(rank, world, addr, port, left)?]
        };
        TcpWorld::joined(rank, world, links, timeout)
    }

    /// The world of a rank with its links, tuned, each read and write waiting at most
    /// `timeout` (more for the ranks other than 0, see [`LEAD_FIRST`]).
    fn joined(
        rank: usize,
        world: usize,
        links: Vec<TcpStream>,
        timeout: Duration,
    ) -> Result<TcpWorld> {
        let wait = if rank == 0 {
            timeout
        } else {
            timeout.saturating_add(LEAD_FIRST)
        };
        for link in &links {
            tune(link, wait)?;
        }
        Ok(TcpWorld {
            rank,
            world,
            links: Mutex::new(links),
            wait,
        })
    }

    fn links(&self) -> std::sync::MutexGuard<'_, Vec<TcpStream>> {
        // A panic elsewhere while holding the lock leaves the streams as they were.
        self.links.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The rank at the other end of link `i`.
    fn peer(&self, i: usize) -> usize {
        if self.rank == 0 { i + 1 } else { 0 }
    }

    /// The error of a message to or from `peer` that failed during `op`; rank 0 also tells
    /// every other rank that it stops, and why, so that none of them waits on.
    fn fault(&self, links: &mut [TcpStream], peer: usize, op: &str, fault: Fault) -> Error {
        let error = match fault {
            Fault::Io(e) if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) => {
                Error::Usage(format!(
                    "rank {} waited {} s for rank {peer} in {op}: rank {peer} is alive but \
                     silent (stopped, swapped out, or stuck on its device); stopping \
                     (--collective-timeout sets the wait)",
                    self.rank,
                    super::seconds(self.wait)
                ))
            }
            Fault::Io(e) => broken(peer, e),
            Fault::Stopped(why) => Error::Usage(format!("rank 0 stopped the job: {why}")),
        };
        if self.rank == 0 {
            let why = error.to_string();
            for (i, link) in links.iter_mut().enumerate() {
                if self.peer(i) != peer {
                    // Best effort: a rank that cannot be told finds out by its own timeout.
                    let _ = link.set_write_timeout(Some(STOP_NOTICE));
                    let _ = send_stop(link, &why);
                }
            }
        }
        error
    }
}

impl Collective for TcpWorld {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world(&self) -> usize {
        self.world
    }

    fn all_reduce_sum(&self, values: &mut [f32]) -> Result<()> {
        const OP: &str = "a sum over the ranks";
        let mut links = self.links();
        if self.rank != 0 {
            let sums = send(&mut links[0], &f32_bytes(values))
                .map_err(Fault::Io)
                .and_then(|()| receive(&mut links[0]))
                .map_err(|f| self.fault(&mut links, 0, OP, f))?;
            return read_f32s(&sums, values, 0);
        }
        let mut theirs = vec![0f32; values.len()];
        for i in 0..links.len() {
            let peer = self.peer(i);
            let bytes = receive(&mut links[i]).map_err(|f| self.fault(&mut links, peer, OP, f))?;
            read_f32s(&bytes, &mut theirs, peer)?;
            for (sum, v) in values.iter_mut().zip(&theirs) {
                *sum += v;
            }
        }
        let sums = f32_bytes(values);
        for i in 0..links.len() {
            let peer = self.peer(i);
            send(&mut links[i], &sums)
                .map_err(|e| self.fault(&mut links, peer, OP, Fault::Io(e)))?;
        }
        Ok(())
    }

    /// A peek at every link without waiting: a closed one names its rank.
    fn check_peers(&self) -> Result<()> {
        let links = self.links();
        let mut byte = [0u8; 1];
        for (i, link) in links.iter().enumerate() {
            link.set_nonblocking(true)
                .map_err(|e| broken(self.peer(i), e))?;
            let peeked = link.peek(&mut byte);
            link.set_nonblocking(false)
                .map_err(|e| broken(self.peer(i), e))?;
            match peeked {
                Ok(0) => {
                    let closed = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
                    return Err(broken(self.peer(i), closed));
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(broken(self.peer(i), e)),
            }
        }
        Ok(())
    }

    fn broadcast(&self, bytes: &mut Vec<u8>) -> Result<()> {
        const OP: &str = "a broadcast from rank 0";
        let mut links = self.links();
        if self.rank != 0 {
            *bytes = receive(&mut links[0]).map_err(|f| self.fault(&mut links, 0, OP, f))?;
            return Ok(());
        }
        for i in 0..links.len() {
            let peer = self.peer(i);
            send(&mut links[i], bytes)
                .map_err(|e| self.fault(&mut links, peer, OP, Fault::Io(e)))?;
        }
        Ok(())
    }
}

/// `TRANSDUCE_JOIN_TIMEOUT` (seconds) or the default.
fn join_timeout() -> Result<Duration> {
    match std::env::var("TRANSDUCE_JOIN_TIMEOUT") {
        Err(_) => Ok(JOIN_TIMEOUT),
        Ok(value) => value
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s > 0.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| {
                Error::Usage(format!(
                    "TRANSDUCE_JOIN_TIMEOUT={value:?}: expected a positive number of seconds"
                ))
            }),
    }
}

/// No Nagle delay (every message is waited for), keep-alive probes, bounded sends, and no
/// read or write waiting longer than `wait`.
fn tune(stream: &TcpStream, wait: Duration) -> Result<()> {
    let failed = |e: std::io::Error| Error::Usage(format!("setting up a rank's connection: {e}"));
    stream.set_nodelay(true).map_err(failed)?;
    stream.set_read_timeout(Some(wait)).map_err(failed)?;
    stream.set_write_timeout(Some(wait)).map_err(failed)?;
    let socket = SockRef::from(stream);
    let keepalive = TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_INTERVAL)
        .with_retries(KEEPALIVE_PROBES);
    socket.set_tcp_keepalive(&keepalive).map_err(failed)?;
    #[cfg(any(target_os = "linux", target_os = "android"))]
    socket
        .set_tcp_user_timeout(Some(SEND_TIMEOUT))
        .map_err(failed)?;
    Ok(())
}

/// The address rank 0 listens on: every interface, of the master address's family.
fn listen_address(addr: &str, port: u16) -> SocketAddr {
    let v6 = (addr, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .is_some_and(|a| a.is_ipv6());
    let ip = match v6 {
        true => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        false => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    };
    SocketAddr::new(ip, port)
}

/// Rank 0's listener on `port` (0: one the kernel chooses), every interface.
fn listen(addr: &str, port: u16) -> Result<TcpListener> {
    TcpListener::bind(listen_address(addr, port)).map_err(|e| {
        Error::Usage(format!(
            "rank 0 cannot listen on port {port} (MASTER_PORT): {e}"
        ))
    })
}

/// Rank 0: every other rank's connection, by rank, through `listener` (on `port`).
fn accept_ranks(
    listener: TcpListener,
    world: usize,
    addr: &str,
    port: u16,
    timeout: Duration,
) -> Result<Vec<TcpStream>> {
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::Usage(format!("listening on port {port}: {e}")))?;
    let mut links: Vec<Option<TcpStream>> = (1..world).map(|_| None).collect();
    let deadline = Instant::now() + timeout;
    while links.iter().any(Option::is_none) {
        match listener.accept() {
            Ok((stream, from)) => {
                stream
                    .set_nonblocking(false)
                    .map_err(|e| Error::Usage(format!("a rank's connection: {e}")))?;
                // A connection that is not a rank of this job is answered and dropped.
                if let Some((rank, stream)) = greet(stream, world, &links, deadline, from) {
                    links[rank - 1] = Some(stream);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    let missing: Vec<String> = links
                        .iter()
                        .enumerate()
                        .filter(|(_, l)| l.is_none())
                        .map(|(i, _)| (i + 1).to_string())
                        .collect();
                    return Err(Error::Usage(format!(
                        "rank 0 waited {:.0} s on port {port} for rank(s) {} of {world}: were they started, with MASTER_ADDR={addr} and MASTER_PORT={port}? (TRANSDUCE_JOIN_TIMEOUT sets the wait)",
                        timeout.as_secs_f64(),
                        missing.join(", ")
                    )));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                return Err(Error::Usage(format!(
                    "rank 0 accepting ranks on port {port}: {e}"
                )));
            }
        }
    }
    Ok(links.into_iter().flatten().collect())
}

/// Rank 0's reading of a new connection's hello: the rank it is, if it belongs to this
/// job and is not taken; the answer (empty, or why not) is sent back either way.
fn greet(
    mut stream: TcpStream,
    world: usize,
    links: &[Option<TcpStream>],
    deadline: Instant,
    from: SocketAddr,
) -> Option<(usize, TcpStream)> {
    let wait = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_secs(1));
    stream.set_read_timeout(Some(wait)).ok()?;
    let hello = receive(&mut stream).ok()?;
    stream.set_read_timeout(None).ok()?;
    let parsed = parse_hello(&hello);
    let refusal = match parsed {
        None => Some(format!("{from} is not a transduce rank")),
        Some((_, theirs)) if theirs != world => Some(format!(
            "rank 0 runs a job of {world} ranks, this rank was told {theirs} (WORLD_SIZE)"
        )),
        Some((rank, _)) if rank == 0 || rank >= world => {
            Some(format!("rank {rank} in a job of {world} ranks"))
        }
        Some((rank, _)) if links[rank - 1].is_some() => Some(format!(
            "two processes claim rank {rank}: each rank needs its own RANK"
        )),
        Some(_) => None,
    };
    let answer = refusal.clone().unwrap_or_default();
    send(&mut stream, answer.as_bytes()).ok()?;
    match refusal {
        Some(why) => {
            eprintln!("rank 0 refused a connection from {from}: {why}");
            None
        }
        None => parsed.map(|(rank, _)| (rank, stream)),
    }
}

fn hello(rank: usize, world: usize) -> Vec<u8> {
    let mut bytes = HELLO.to_vec();
    bytes.extend((rank as u64).to_le_bytes());
    bytes.extend((world as u64).to_le_bytes());
    bytes
}

/// The rank and world size a hello names.
fn parse_hello(bytes: &[u8]) -> Option<(usize, usize)> {
    let rest = bytes.strip_prefix(HELLO)?;
    let (rank, world) = rest.split_at_checked(8)?;
    let number = |b: &[u8]| Some(u64::from_le_bytes(b.try_into().ok()?) as usize);
    Some((number(rank)?, number(world)?))
}

/// A rank other than 0: its connection to rank 0, once rank 0 has accepted it.
fn connect_to_lead(
    rank: usize,
    world: usize,
    addr: &str,
    port: u16,
    timeout: Duration,
) -> Result<TcpStream> {
    let deadline = Instant::now() + timeout;
    let mut stream = super::dial::connect_retrying(addr, port, deadline).map_err(|last_error| {
        Error::Usage(format!(
            "rank {rank} could not reach rank 0 at {addr}:{port} within {:.0} s ({last_error}): is rank 0 running, and MASTER_ADDR/MASTER_PORT the same for every rank? (TRANSDUCE_JOIN_TIMEOUT sets the wait)",
            timeout.as_secs_f64()
        ))
    })?;
    let answer = send(&mut stream, &hello(rank, world))
        .map_err(Fault::Io)
        .and_then(|()| receive(&mut stream))
        .map_err(|f| match f {
            Fault::Io(e) => broken(0, e),
            Fault::Stopped(why) => Error::Usage(format!("rank 0 stopped the job: {why}")),
        })?;
    if !answer.is_empty() {
        return Err(Error::Usage(format!(
            "rank 0 refused rank {rank}: {}",
            String::from_utf8_lossy(&answer)
        )));
    }
    Ok(stream)
}

/// The error for a connection to rank `peer` that failed.
fn broken(peer: usize, e: std::io::Error) -> Error {
    let why = match e.kind() {
        ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset | ErrorKind::BrokenPipe => {
            "it closed the connection: that rank stopped (see its own error), or was killed"
                .to_string()
        }
        ErrorKind::TimedOut | ErrorKind::WouldBlock => {
            "no answer: the network between the ranks failed, or that machine stopped".to_string()
        }
        _ => e.to_string(),
    };
    Error::Usage(format!("lost rank {peer}: {why}; stopping this rank"))
}

/// One message: its length (8 bytes, little-endian), then its bytes.
fn send(stream: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    stream
        .write_all(&(bytes.len() as u64).to_le_bytes())
        .and_then(|()| stream.write_all(bytes))
        .and_then(|()| stream.flush())
}

/// Rank 0's notice that it stops the job, and why.
fn send_stop(stream: &mut TcpStream, why: &str) -> std::io::Result<()> {
    stream
        .write_all(&STOP.to_le_bytes())
        .and_then(|()| send(stream, why.as_bytes()))
}

fn receive(stream: &mut TcpStream) -> std::result::Result<Vec<u8>, Fault> {
    let mut len = [0u8; 8];
    stream.read_exact(&mut len).map_err(Fault::Io)?;
    let len = u64::from_le_bytes(len);
    if len == STOP {
        let why = match receive(stream) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(_) => "it gave no reason".to_string(),
        };
        return Err(Fault::Stopped(why));
    }
    let len = len as usize;
    let mut bytes = Vec::new();
    // Read in steps, so a corrupt length cannot ask for more memory than arrives.
    let mut remaining = len;
    while remaining > 0 {
        let take = remaining.min(1 << 24);
        let at = bytes.len();
        bytes.resize(at + take, 0);
        stream.read_exact(&mut bytes[at..]).map_err(Fault::Io)?;
        remaining -= take;
    }
    Ok(bytes)
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// `bytes` (from rank `peer`) as f32s into `out`, which they must fill exactly.
fn read_f32s(bytes: &[u8], out: &mut [f32], peer: usize) -> Result<()> {
    if bytes.len() != out.len() * 4 {
        return Err(Error::Usage(format!(
            "rank {peer} sent {} values where this rank has {}: do the ranks train the same model?",
            bytes.len() / 4,
            out.len()
        )));
    }
    for (v, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::COLLECTIVE_TIMEOUT;
    use super::*;

    /// A free port on this machine (bound, read and let go).
    fn free_port() -> u16 {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    /// `world` ranks joined in threads, each running `body` on its world.
    fn job<T: Send>(world: usize, body: impl Fn(TcpWorld) -> T + Sync) -> Vec<T> {
        job_waiting(world, COLLECTIVE_TIMEOUT, body)
    }

    /// [`job`] with collectives that wait at most `timeout`.
    fn job_waiting<T: Send>(
        world: usize,
        timeout: Duration,
        body: impl Fn(TcpWorld) -> T + Sync,
    ) -> Vec<T> {
        let port = free_port();
        std::thread::scope(|scope| {
            let ranks: Vec<_> = (0..world)
                .map(|rank| {
                    let body = &body;
                    scope.spawn(move || {
                        body(TcpWorld::join(rank, world, "127.0.0.1", port, timeout).unwrap())
                    })
                })
                .collect();
            ranks.into_iter().map(|r| r.join().unwrap()).collect()
        })
    }

    #[test]
    fn sums_are_added_in_rank_order_and_reach_every_rank() {
        // In f32, (1e8 − 1e8) + 1 is 1 but (1e8 + 1) − 1e8 is 0 (1e8 + 1 rounds to 1e8):
        // the sum is the one of rank order, not of whoever arrived first.
        let values = [1e8f32, -1e8, 1.0];
        let sums = job(3, |w| {
            let mut v = vec![values[w.rank()], w.rank() as f32];
            w.all_reduce_sum(&mut v).unwrap();
            v
        });
        for s in &sums {
            assert_eq!(s, &vec![1.0, 3.0]);
        }
    }

    #[test]
    fn rank_zero_broadcasts_its_bytes_of_any_length() {
        let got = job(3, |w| {
            let mut bytes = match w.rank() {
                0 => (0..70_000u32).map(|i| i as u8).collect(),
                r => vec![r as u8; 3],
            };
            w.broadcast(&mut bytes).unwrap();
            let mut empty = if w.leads() { Vec::new() } else { vec![9] };
            w.broadcast(&mut empty).unwrap();
            (bytes, empty)
        });
        let want: Vec<u8> = (0..70_000u32).map(|i| i as u8).collect();
        for (bytes, empty) in got {
            assert_eq!(bytes, want);
            assert!(empty.is_empty());
        }
    }

    #[test]
    fn a_rank_that_goes_away_is_named_by_the_others() {
        let errors = job(2, |w| {
            if w.rank() == 1 {
                drop(w);
                return String::new();
            }
            let mut v = vec![1.0f32];
            w.all_reduce_sum(&mut v).unwrap_err().to_string()
        });
        assert!(
            errors[0].starts_with("lost rank 1: it closed the connection"),
            "{}",
            errors[0]
        );
    }

    /// A rank alive but silent: rank 0 names it once the timeout has passed and tells the
    /// others, who say so; nobody waits much longer than the timeout.
    #[test]
    fn a_silent_rank_is_named_by_every_rank_after_the_timeout() {
        let timeout = Duration::from_millis(1500);
        let started = Instant::now();
        let errors = job_waiting(3, timeout, |w| {
            if w.rank() == 2 {
                // Connected, but never takes part (until the others have given up).
                std::thread::sleep(Duration::from_secs(4));
                return (String::new(), Duration::ZERO);
            }
            let mut v = vec![1.0f32];
            let error = w.all_reduce_sum(&mut v).unwrap_err().to_string();
            (error, started.elapsed())
        });
        let lead = "rank 0 waited 1.5 s for rank 2 in a sum over the ranks: rank 2 is alive but \
                    silent (stopped, swapped out, or stuck on its device); stopping \
                    (--collective-timeout sets the wait)";
        assert_eq!(errors[0].0, lead);
        assert_eq!(errors[1].0, format!("rank 0 stopped the job: {lead}"));
        for (_, after) in &errors[..2] {
            assert!(*after < timeout + Duration::from_secs(2), "{after:?}");
        }
    }

    /// A silent rank 0: the others wait a little longer than the timeout, then name it.
    #[test]
    fn a_silent_rank_zero_is_named_by_the_others() {
        let timeout = Duration::from_millis(500);
        let errors = job_waiting(2, timeout, |w| {
            if w.rank() == 0 {
                std::thread::sleep(timeout + LEAD_FIRST + Duration::from_secs(2));
                return String::new();
            }
            let mut bytes = Vec::new();
            w.broadcast(&mut bytes).unwrap_err().to_string()
        });
        assert!(
            errors[1].starts_with(
                "rank 1 waited 5.5 s for rank 0 in a broadcast from rank 0: rank 0 is alive but silent"
            ),
            "{}",
            errors[1]
        );
    }

    /// The check a rank waiting on NCCL makes: quiet links pass (nothing is consumed, so
    /// the next sum still works), a closed one names its rank, on either side.
    #[test]
    fn a_peek_finds_a_lost_rank_without_waiting() {
        let barrier = std::sync::Barrier::new(3);
        // Ranks 0 and 1 keep their links until both have looked.
        let looked = std::sync::Barrier::new(2);
        let errors = job(3, |w| {
            w.check_peers().unwrap();
            let mut v = vec![w.rank() as f32];
            w.all_reduce_sum(&mut v).unwrap();
            assert_eq!(v, vec![3.0]);
            barrier.wait();
            if w.rank() == 2 {
                drop(w);
                barrier.wait();
                return String::new();
            }
            barrier.wait();
            // Closed by rank 2 now; rank 1's link to rank 0 is quiet.
            let error = match w.rank() {
                0 => w.check_peers().unwrap_err().to_string(),
                _ => {
                    w.check_peers().unwrap();
                    String::new()
                }
            };
            looked.wait();
            error
        });
        assert!(
            errors[0].starts_with("lost rank 2: it closed the connection"),
            "{}",
            errors[0]
        );
    }

    #[test]
    fn a_job_of_another_size_or_a_taken_rank_is_refused() {
        let port = free_port();
        std::thread::scope(|scope| {
            let lead = scope.spawn(|| TcpWorld::join(0, 2, "127.0.0.1", port, COLLECTIVE_TIMEOUT));
            let wrong = connect_to_lead(1, 3, "127.0.0.1", port, Duration::from_secs(30));
            assert_eq!(
                wrong.unwrap_err().to_string(),
                "rank 0 refused rank 1: rank 0 runs a job of 2 ranks, this rank was told 3 (WORLD_SIZE)"
            );
            let right = connect_to_lead(1, 2, "127.0.0.1", port, Duration::from_secs(30));
            assert!(right.is_ok());
            assert!(lead.join().unwrap().is_ok());
        });
    }

    #[test]
    fn hellos_round_trip_and_strangers_are_not_ranks() {
        assert_eq!(parse_hello(&hello(3, 8)), Some((3, 8)));
        assert_eq!(parse_hello(b"GET / HTTP/1.1\r\n"), None);
        assert_eq!(parse_hello(HELLO), None);
    }
}
