//! A TCP connection to a peer that may not be listening yet (rank 0, torchrun's store):
//! retried until a deadline, every address the name resolves to tried in turn.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// A connection to `addr:port`, retried while nothing answers there, until `deadline`;
/// the last failure's text after it.
pub fn connect_retrying(
    addr: &str,
    port: u16,
    deadline: Instant,
) -> std::result::Result<TcpStream, String> {
    let mut last_error = String::new();
    loop {
        let addresses: Vec<SocketAddr> = match (addr, port).to_socket_addrs() {
            Ok(a) => a.collect(),
            Err(e) => {
                last_error = format!("cannot resolve MASTER_ADDR={addr}: {e}");
                Vec::new()
            }
        };
        let connected = addresses.iter().find_map(|a| {
            TcpStream::connect_timeout(a, Duration::from_secs(5))
                .map_err(|e| last_error = e.to_string())
                .ok()
        });
        if let Some(stream) = connected {
            return Ok(stream);
        }
        if Instant::now() >= deadline {
            return Err(last_error);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
