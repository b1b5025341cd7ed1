//! One node's `MONITOR` lines into the witness's log: each command on the namespace's keys
//! (one per key it names: a script's `KEYS`, a multi-key command's every key; a script's own
//! calls with the call they belong to), each client's phases, and its tie to the frozen
//! worker, looked up in `/proc` on its first command on the keys while its socket is open.

use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use super::seen::{Command, Sender};
use super::sockets;
use super::target::Frozen;
use super::witness::Phase;
use crate::access::monitor::Seen;
use crate::glob::Glob;

/// At most this many commands on the namespace's keys are kept.
pub const MAX_COMMANDS: usize = 10_000;
/// At most this many clients are followed.
pub const MAX_CLIENTS: usize = 10_000;
/// How a client was tied when first heard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tied {
    /// One of the frozen worker's sockets.
    Worker,
    /// Another socket of the worker's network namespace, or another address.
    Other,
    /// Gone before it could be looked up, from an address the worker uses.
    Unknown,
    /// The processes are not known (a freeze by commands).
    NotLooked,
}

pub struct Client {
    pub spoke_frozen: bool,
    pub spoke_after: bool,
    pub tied: Tied,
    /// It sent a command on a key of the namespace after the freeze began.
    pub touched: bool,
}

#[derive(Default)]
pub struct Log {
    pub commands: Vec<(Command, Phase)>,
    pub clients: HashMap<String, Client>,
    /// The frozen worker's sockets found so far.
    pub worker: BTreeSet<(String, u16)>,
    pub dropped: u64,
    /// Lines that could not be read.
    pub unread: u64,
    /// A script's own calls on the keys after no script call (their client unknown).
    pub orphans: u64,
    /// More clients than are followed.
    pub overflow: bool,
}

pub fn phase_of(v: u8) -> Phase {
    match v {
        1 => Phase::Frozen,
        2 => Phase::Thawed,
        _ => Phase::Before,
    }
}

/// The client, command and script that a script's own calls belong to.
#[derive(Default)]
pub struct Last {
    client: String,
    name: String,
    script: Option<u64>,
}

/// One node's `MONITOR` lines into the log.
pub struct Reader {
    /// The node's clock ahead of this host's, in microseconds (`TIME` at the start).
    pub offset_us: i64,
    pub phase: Arc<AtomicU8>,
    pub log: Arc<Mutex<Log>>,
    pub pattern: Glob,
    pub frozen: Frozen,
    pub found: Arc<Mutex<Vec<i32>>>,
    pub marker: String,
    pub last: Last,
}

/// The worker's processes: those frozen by pid or cgroup, else those a freeze by commands
/// was found to stop.
pub fn worker_pids(frozen: &Frozen, found: &Mutex<Vec<i32>>) -> Vec<i32> {
    match frozen.pids() {
        p if !p.is_empty() => p,
        _ => found.lock().unwrap_or_else(|p| p.into_inner()).clone(),
    }
}

impl Reader {
    /// One line; `true` at the end marker.
    pub fn read(&mut self, line: Result<Seen, String>) -> bool {
        let Ok(seen) = line else {
            self.log.lock().unwrap_or_else(|p| p.into_inner()).unread += 1;
            return false;
        };
        let Some(name) = seen
            .args
            .first()
            .map(|n| String::from_utf8_lossy(n).to_ascii_uppercase())
        else {
            return false;
        };
        if name == "ECHO" && seen.args.get(1).is_some_and(|a| a == self.marker.as_bytes()) {
            return true;
        }
        let phase = phase_of(self.phase.load(Ordering::Relaxed));
        let mut orphan = false;
        let (client, name, script) = if seen.client == "lua" {
            let l = &self.last;
            // A script's own calls follow its call; after anything else their client is not
            // known (servers that do not show FCALL to MONITOR).
            orphan = !is_script(&l.name);
            (
                l.client.clone(),
                format!("{}>{}", l.name, name.to_ascii_lowercase()),
                l.script,
            )
        } else {
            let script = script_of(&name, &seen.args);
            self.last = Last {
                client: seen.client.clone(),
                name: name.clone(),
                script,
            };
            (seen.client.clone(), name, script)
        };
        let mut keys: Vec<Vec<u8>> = keys_of(&name, &seen.args)
            .filter(|a| self.pattern.matches(a))
            .map(<[u8]>::to_vec)
            .collect();
        keys.dedup();
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if orphan && !keys.is_empty() {
            log.orphans += 1;
        }
        if !log.clients.contains_key(&client) {
            match log.clients.len() < MAX_CLIENTS {
                true => {
                    log.clients.insert(
                        client.clone(),
                        Client {
                            spoke_frozen: false,
                            spoke_after: false,
                            tied: Tied::NotLooked,
                            touched: false,
                        },
                    );
                }
                false => log.overflow = true,
            }
        }
        // Tied when it first sends a command on the namespace's keys, while its socket is open.
        let untied = log.clients.get(&client).is_some_and(|c| c.tied == Tied::NotLooked);
        if untied && !keys.is_empty() {
            // Sent while the worker was frozen: not the worker's.
            let tied = match phase {
                Phase::Frozen => Tied::Other,
                _ => self.tie(&mut log, &client),
            };
            if let Some(c) = log.clients.get_mut(&client) {
                c.tied = tied;
            }
        }
        if let Some(c) = log.clients.get_mut(&client) {
            c.spoke_frozen |= phase == Phase::Frozen;
            c.spoke_after |= phase == Phase::Thawed;
            c.touched |= !keys.is_empty() && phase != Phase::Before;
        }
        let name = if name == "SET" {
            let flag = |f: &str| seen.args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(f.as_bytes()));
            match (flag("NX"), flag("IFEQ")) {
                (true, _) => "SET NX".to_string(),
                (_, true) => "SET IFEQ".to_string(),
                _ => "SET (no NX)".to_string(),
            }
        } else {
            name
        };
        let at_ms = (seen.at_us - self.offset_us) / 1000;
        for key in keys {
            if log.commands.len() >= MAX_COMMANDS {
                log.dropped += 1;
                continue;
            }
            let command = Command {
                at_ms,
                key: String::from_utf8_lossy(&key).into_owned(),
                name: name.clone(),
                by: Sender::Other { addr: client.clone() },
                script,
            };
            log.commands.push((command, phase));
        }
        false
    }

    /// Tie a client on its first command on the namespace's keys: look the frozen
    /// processes' sockets up again (a connection opened after the freeze began is found
    /// while it is open).
    fn tie(&self, log: &mut Log, client: &str) -> Tied {
        if client == "lua" {
            return Tied::Other;
        }
        let pids = worker_pids(&self.frozen, &self.found);
        if pids.is_empty() {
            return Tied::NotLooked;
        }
        let Some(addr) = sockets::client_addr(client) else {
            return Tied::Unknown;
        };
        if !log.worker.contains(&addr) {
            log.worker.extend(sockets::local_addrs(&pids));
        }
        if log.worker.contains(&addr) {
            return Tied::Worker;
        }
        // Not the worker's now: another process's, unless it was already gone and came from
        // an address the worker's own connections use.
        let worker_ips: BTreeSet<&String> = log.worker.iter().map(|(ip, _)| ip).collect();
        match !worker_ips.contains(&addr.0) || sockets::open_in_netns(&pids, &addr) {
            true => Tied::Other,
            false => Tied::Unknown,
        }
    }
}

/// A command that runs a script or function.
pub fn is_script(name: &str) -> bool {
    matches!(
        name,
        "EVAL" | "EVALSHA" | "EVAL_RO" | "EVALSHA_RO" | "FCALL" | "FCALL_RO"
    )
}

/// The keys a command names: a script's or function's `KEYS`, else every argument.
pub fn keys_of<'a>(name: &str, args: &'a [Vec<u8>]) -> Box<dyn Iterator<Item = &'a [u8]> + 'a> {
    if is_script(name) {
        let n = args
            .get(2)
            .and_then(|n| std::str::from_utf8(n).ok())
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0);
        Box::new(args.iter().skip(3).take(n).map(Vec::as_slice))
    } else {
        Box::new(args.iter().skip(1).map(Vec::as_slice))
    }
}

/// A script's (or function's) identity: a hash of its body, SHA or function name.
pub fn script_of(name: &str, args: &[Vec<u8>]) -> Option<u64> {
    let body = args.get(1).filter(|_| is_script(name))?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    body.to_ascii_lowercase().hash(&mut h);
    Some(h.finish())
}
