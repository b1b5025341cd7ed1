//! The frozen worker's TCP connections, from `/proc`: each process's socket inodes
//! (`/proc/PID/fd`) looked up in its network namespace's tables (`/proc/PID/net/tcp`,
//! `tcp6`), giving the local `ip:port` that Redis shows as the client's address (when no
//! NAT stands between them); and whether they listen on a port (the exporter's).

use std::collections::{BTreeSet, HashSet};
use std::net::{Ipv4Addr, Ipv6Addr};

/// The local addresses (`ip`, port) of the TCP connections `pids` hold (not listeners).
pub fn local_addrs(pids: &[i32]) -> BTreeSet<(String, u16)> {
    sockets(pids)
        .into_iter()
        .filter(|(_, listening)| !listening)
        .map(|(a, _)| a)
        .collect()
}

/// Whether one of `pids` listens on TCP `port` (the exporter the drill reads from, say).
pub fn listens_on(pids: &[i32], port: u16) -> bool {
    sockets(pids).iter().any(|((_, p), listening)| *listening && *p == port)
}

/// Whether `addr` is the local address of a TCP socket open now in the network namespace of
/// the first of `pids` (any process's).
pub fn open_in_netns(pids: &[i32], addr: &(String, u16)) -> bool {
    let Some(pid) = pids.first() else { return false };
    ["tcp", "tcp6"].iter().any(|table| {
        std::fs::read_to_string(format!("/proc/{pid}/net/{table}"))
            .unwrap_or_default()
            .lines()
            .skip(1)
            .filter_map(|l| {
                // A socket still open (a closed one in TIME_WAIT keeps its line, inode 0).
                let f: Vec<&str> = l.split_whitespace().collect();
                f.get(9).filter(|i| **i != "0").and(f.get(1)).and_then(|a| decode(a))
            })
            .any(|a| a == *addr)
    })
}

/// Every TCP socket of `pids`: its local address, and whether it listens (state `0A`).
fn sockets(pids: &[i32]) -> Vec<((String, u16), bool)> {
    let mut out = Vec::new();
    for pid in pids {
        let inodes = socket_inodes(*pid);
        if inodes.is_empty() {
            continue;
        }
        for table in ["tcp", "tcp6"] {
            let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
                continue;
            };
            for line in text.lines().skip(1) {
                let f: Vec<&str> = line.split_whitespace().collect();
                let (Some(local), Some(state), Some(inode)) =
                    (f.get(1), f.get(3), f.get(9).and_then(|i| i.parse::<u64>().ok()))
                else {
                    continue;
                };
                if inodes.contains(&inode)
                    && let Some(addr) = decode(local)
                {
                    out.push((addr, *state == "0A"));
                }
            }
        }
    }
    out
}

fn socket_inodes(pid: i32) -> HashSet<u64> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return HashSet::new();
    };
    fds.flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|l| l.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok())
        .collect()
}

/// `0100007F:C350` (IPv4) or 32 hex digits and a port (IPv6), as the kernel writes them:
/// each 32-bit word in host (little-endian) order.
fn decode(hex: &str) -> Option<(String, u16)> {
    let (ip, port) = hex.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Vec<u32> = (0..ip.len() / 8)
        .map(|i| u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16).ok())
        .collect::<Option<_>>()?;
    // Each word as it lies in this host's memory is the address's bytes.
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
    let ip = match <[u8; 4]>::try_from(bytes.as_slice()) {
        Ok(v4) => Ipv4Addr::from(v4).to_string(),
        Err(_) => {
            let v6 = Ipv6Addr::from(<[u8; 16]>::try_from(bytes.as_slice()).ok()?);
            v6.to_ipv4_mapped().map_or_else(|| v6.to_string(), |v4| v4.to_string())
        }
    };
    Some((ip, port))
}

/// A client address as Redis prints it (`127.0.0.1:5000`, `[::1]:5000`, `::ffff:10.0.0.2:5000`),
/// as (`ip`, port) in the form `local_addrs` gives.
pub fn client_addr(s: &str) -> Option<(String, u16)> {
    let (ip, port) = s.rsplit_once(':')?;
    let port = port.parse().ok()?;
    let ip = ip.trim_start_matches('[').trim_end_matches(']');
    let ip = ip.strip_prefix("::ffff:").unwrap_or(ip);
    Some((ip.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_addresses_decode() {
        assert_eq!(decode("0100007F:C350"), Some(("127.0.0.1".into(), 50000)));
        assert_eq!(
            decode("0000000000000000FFFF00000100007F:1F90"),
            Some(("127.0.0.1".into(), 8080))
        );
        assert_eq!(
            decode("00000000000000000000000001000000:0050"),
            Some(("::1".into(), 80))
        );
        assert_eq!(client_addr("[::1]:80"), Some(("::1".into(), 80)));
        assert_eq!(client_addr("::ffff:127.0.0.1:8080"), Some(("127.0.0.1".into(), 8080)));
        assert_eq!(client_addr("unix:/tmp/r.sock"), None);
    }

    #[test]
    fn a_process_s_own_connection_is_found() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let conn = std::net::TcpStream::connect(listener.local_addr().unwrap_or_else(|e| panic!("{e}")))
            .unwrap_or_else(|e| panic!("{e}"));
        let mine = conn.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let me = [std::process::id() as i32];
        let found = local_addrs(&me);
        assert!(found.contains(&(mine.ip().to_string(), mine.port())), "{found:?}");
        let port = listener.local_addr().unwrap_or_else(|e| panic!("{e}")).port();
        assert!(listens_on(&me, port) && !found.iter().any(|(_, p)| *p == port));
    }
}
