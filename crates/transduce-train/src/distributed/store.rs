//! A client of torchrun's store: PyTorch's `TCPStore`, which torchrun's agent serves on
//! `MASTER_PORT` (`TORCHELASTIC_USE_AGENT_STORE=True`). Ranks that torchrun started meet
//! through it as PyTorch's own do: rank 0 listens on a port the kernel chooses and sets it
//! under a key of this run and restart; the others wait for the key and read it.
//!
//! The wire protocol (`torch/csrc/distributed/c10d/TCPStoreBackend.hpp`): a query is one
//! byte of its type and its arguments; strings and byte arrays go as a u64 length and
//! their bytes, numbers in the machine's order (little-endian on every platform PyTorch
//! ships). A connection opens with `VALIDATE` and a magic number. `SET` has no answer,
//! `CHECK` answers one byte (0: every key is there), `GET` the value.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// The query types this client sends, numbered as PyTorch's `QueryType`.
#[repr(u8)]
#[derive(Clone, Copy)]
enum Query {
    Validate = 0,
    Set = 1,
    Get = 3,
    Check = 5,
}

/// The number a connection opens with (`validationMagicNumber`).
const MAGIC: u32 = 0x3C85_F7CE;
/// `CHECK`'s answer when every key is set.
const READY: u8 = 0;
/// How long one answer of the store may take.
const ANSWER: Duration = Duration::from_secs(30);

/// A connection to the store.
pub struct Store {
    stream: TcpStream,
    at: String,
}

impl Store {
    /// Connects to the store at `addr:port`, retrying until `deadline` while it does not
    /// answer yet.
    pub fn connect(addr: &str, port: u16, deadline: Instant) -> Result<Store> {
        let at = format!("{addr}:{port}");
        let stream = super::dial::connect_retrying(addr, port, deadline).map_err(|last_error| {
            Error::Usage(format!(
                "torchrun's store at {at} (MASTER_ADDR, MASTER_PORT) did not answer ({last_error}): is torchrun's agent running? (TRANSDUCE_JOIN_TIMEOUT sets the wait)"
            ))
        })?;
        let failed = |e: std::io::Error| store_error(&at, e);
        stream.set_nodelay(true).map_err(failed)?;
        stream.set_read_timeout(Some(ANSWER)).map_err(failed)?;
        stream.set_write_timeout(Some(ANSWER)).map_err(failed)?;
        let mut store = Store { stream, at };
        let mut query = vec![Query::Validate as u8];
        query.extend(MAGIC.to_le_bytes());
        store.send(&query)?;
        Ok(store)
    }

    /// Sets `key` to `value`.
    pub fn set(&mut self, key: &str, value: &[u8]) -> Result<()> {
        let mut query = vec![Query::Set as u8];
        put(&mut query, key.as_bytes());
        put(&mut query, value);
        self.send(&query)
    }

    /// The value of `key`, once some rank has set it; an error after `deadline`.
    pub fn get(&mut self, key: &str, deadline: Instant) -> Result<Vec<u8>> {
        loop {
            let mut query = vec![Query::Check as u8];
            query.extend(1u64.to_le_bytes());
            put(&mut query, key.as_bytes());
            self.send(&query)?;
            let mut answer = [0u8; 1];
            self.read(&mut answer)?;
            if answer[0] == READY {
                break;
            }
            if Instant::now() >= deadline {
                return Err(Error::Usage(format!(
                    "torchrun's store at {} has no {key:?} yet: rank 0 did not start, or was started by another job (TRANSDUCE_JOIN_TIMEOUT sets the wait)",
                    self.at
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut query = vec![Query::Get as u8];
        put(&mut query, key.as_bytes());
        self.send(&query)?;
        let mut len = [0u8; 8];
        self.read(&mut len)?;
        let len = u64::from_le_bytes(len);
        // A value of ours is a port number: anything long is not one.
        if len > 4096 {
            return Err(Error::Usage(format!(
                "torchrun's store at {} answered {len} bytes for {key:?}: not a value of this program's",
                self.at
            )));
        }
        let mut value = vec![0u8; len as usize];
        self.read(&mut value)?;
        Ok(value)
    }

    fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.stream
            .write_all(bytes)
            .and_then(|()| self.stream.flush())
            .map_err(|e| store_error(&self.at, e))
    }

    fn read(&mut self, into: &mut [u8]) -> Result<()> {
        self.stream
            .read_exact(into)
            .map_err(|e| store_error(&self.at, e))
    }
}

/// A string or byte array as the protocol sends it: u64 length, bytes.
fn put(query: &mut Vec<u8>, bytes: &[u8]) {
    query.extend((bytes.len() as u64).to_le_bytes());
    query.extend(bytes);
}

fn store_error(at: &str, e: std::io::Error) -> Error {
    Error::Usage(format!("torchrun's store at {at}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::net::TcpListener;

    /// A store that answers as PyTorch's does, for the queries this client sends: the
    /// protocol written out from its definition, independently of the client.
    fn serve(listener: TcpListener) {
        let mut values: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        let mut clients = Vec::new();
        for _ in 0..2 {
            clients.push(listener.accept().unwrap().0);
        }
        let read_u64 = |s: &mut TcpStream| {
            let mut b = [0u8; 8];
            s.read_exact(&mut b).map(|()| u64::from_le_bytes(b))
        };
        let read_str = |s: &mut TcpStream| -> std::io::Result<Vec<u8>> {
            let len = read_u64(s)?;
            let mut b = vec![0u8; len as usize];
            s.read_exact(&mut b)?;
            Ok(b)
        };
        // Each client's first query validates it.
        for c in &mut clients {
            let mut b = [0u8; 5];
            c.read_exact(&mut b).unwrap();
            assert_eq!(b[0], 0);
            assert_eq!(u32::from_le_bytes(b[1..].try_into().unwrap()), 0x3C85F7CE);
            c.set_nonblocking(true).unwrap();
        }
        // A client that has hung up is read no more: a closed socket answers every later
        // read with 0 bytes again, which would count it as closing twice.
        let mut closed = vec![false; clients.len()];
        while closed.iter().any(|&done| !done) {
            for (c, done) in clients.iter_mut().zip(closed.iter_mut()) {
                if *done {
                    continue;
                }
                let mut kind = [0u8; 1];
                match c.read(&mut kind) {
                    Ok(0) => {
                        *done = true;
                        c.shutdown(std::net::Shutdown::Both).ok();
                        continue;
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                    Err(_) => {
                        *done = true;
                        continue;
                    }
                }
                c.set_nonblocking(false).unwrap();
                match kind[0] {
                    1 => {
                        let key = read_str(c).unwrap();
                        let value = read_str(c).unwrap();
                        values.insert(key, value);
                    }
                    5 => {
                        let n = read_u64(c).unwrap();
                        let keys: Vec<Vec<u8>> = (0..n).map(|_| read_str(c).unwrap()).collect();
                        let ready = keys.iter().all(|k| values.contains_key(k));
                        c.write_all(&[if ready { 0 } else { 1 }]).unwrap();
                    }
                    3 => {
                        let key = read_str(c).unwrap();
                        let value = &values[&key];
                        c.write_all(&(value.len() as u64).to_le_bytes()).unwrap();
                        c.write_all(value).unwrap();
                    }
                    other => panic!("query type {other}"),
                }
                c.set_nonblocking(true).unwrap();
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_value_set_by_one_client_is_waited_for_and_read_by_another() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || serve(listener));
        let deadline = Instant::now() + Duration::from_secs(30);
        let reader = std::thread::spawn(move || {
            let mut store = Store::connect("127.0.0.1", port, deadline).unwrap();
            store.get("transduce/run/0/lead", deadline).unwrap()
        });
        std::thread::sleep(Duration::from_millis(200));
        let mut store = Store::connect("127.0.0.1", port, deadline).unwrap();
        store.set("transduce/run/0/lead", b"40123").unwrap();
        assert_eq!(reader.join().unwrap(), b"40123");
        drop(store);
        server.join().unwrap();
    }

    #[test]
    fn a_key_nobody_sets_is_an_error_at_the_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || serve(listener));
        let deadline = Instant::now() + Duration::from_millis(300);
        let mut a = Store::connect("127.0.0.1", port, deadline).unwrap();
        let b = Store::connect("127.0.0.1", port, deadline).unwrap();
        let e = a.get("missing", deadline).unwrap_err().to_string();
        assert!(e.contains("has no \"missing\" yet"), "{e}");
        drop((a, b));
        server.join().unwrap();
    }
}
