//! The witness: `MONITOR` on every primary from the freeze to the end of the observation,
//! keeping the commands that touch the namespace's keys and which clients spoke while the
//! worker was frozen and after. It tells a deletion of the new owner's lock sent by the
//! woken worker from the new owner's own release. Bounded; when the server refuses
//! `MONITOR` the drill goes on without it and says so.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::seen::{Command, Sender, Witnessed};
use super::sockets;
use crate::access::monitor::Seen;
use crate::config::TargetConfig;
use crate::glob::Glob;

/// At most this many commands on the namespace's keys are kept.
const MAX_COMMANDS: usize = 10_000;
/// At most this many clients are followed.
const MAX_CLIENTS: usize = 10_000;

/// Where the drill is, as the witness tags what it sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    Before = 0,
    Frozen = 1,
    Thawed = 2,
}

#[derive(Default)]
struct Log {
    commands: Vec<(Command, Phase)>,
    /// Per client: spoke while frozen, spoke after the thaw.
    clients: HashMap<String, (bool, bool)>,
    dropped: u64,
}

/// The running witness.
pub struct Witness {
    phase: Arc<AtomicU8>,
    log: Arc<Mutex<Log>>,
    stop: CancellationToken,
    tasks: Vec<JoinHandle<Option<String>>>,
    refused: Option<String>,
}

impl Witness {
    /// `MONITOR` on each primary of `t`, keeping commands on keys `pattern` matches. A node
    /// that refuses is said in [`Witnessed::unavailable`].
    pub async fn start(t: &TargetConfig, pattern: Glob) -> Witness {
        let mut w = Witness {
            phase: Arc::new(AtomicU8::new(Phase::Before as u8)),
            log: Arc::default(),
            stop: CancellationToken::new(),
            tasks: vec![],
            refused: None,
        };
        let links = match crate::access::connect::primary_links(t).await {
            Ok(l) => l,
            Err(e) => {
                w.refused = Some(format!("the primaries could not be listed: {e}"));
                return w;
            }
        };
        for link in links {
            let node = link.node();
            let stream = match link.monitor().await {
                Ok(s) => s,
                Err(e) => {
                    w.refused = Some(format!("{node} refused MONITOR ({e})"));
                    break;
                }
            };
            let (phase, log, stop, pattern) = (w.phase.clone(), w.log.clone(), w.stop.clone(), pattern.clone());
            w.tasks.push(tokio::spawn(async move {
                let mut stream = stream;
                let mut last = (String::new(), String::new());
                loop {
                    tokio::select! {
                        () = stop.cancelled() => return None,
                        line = stream.next() => match line {
                            None => return Some(format!("{node} closed the MONITOR connection")),
                            Some(seen) => {
                                let now = phase_of(phase.load(Ordering::Relaxed));
                                let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
                                record(&mut log, &pattern, seen, now, &mut last);
                            }
                        }
                    }
                }
            }));
        }
        w
    }

    /// The drill moved on: what comes next is tagged so.
    pub fn enter(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::Relaxed);
    }

    /// Stop, and attribute: the clients whose address is one of `worker` (the frozen
    /// processes' sockets) are the worker's; without any, those silent while it was frozen
    /// and heard after the thaw.
    pub async fn finish(mut self, worker: &BTreeSet<(String, u16)>) -> Witnessed {
        self.stop.cancel();
        let mut unavailable = self.refused.take();
        for t in self.tasks.drain(..) {
            if let Ok(Some(why)) = t.await {
                unavailable.get_or_insert(why);
            }
        }
        let log = std::mem::take(&mut *self.log.lock().unwrap_or_else(|p| p.into_inner()));
        let by_socket: Vec<String> = log
            .clients
            .keys()
            .filter(|c| sockets::client_addr(c).is_some_and(|a| worker.contains(&a)))
            .cloned()
            .collect();
        let worker_addrs: Vec<(String, String)> = if by_socket.is_empty() {
            let mut silent: Vec<(String, String)> = log
                .clients
                .iter()
                .filter(|(c, (frozen, after))| *after && !*frozen && c.as_str() != "lua")
                .map(|(c, _)| {
                    (
                        c.clone(),
                        "silent while the worker was frozen, heard after the thaw".to_string(),
                    )
                })
                .collect();
            silent.sort();
            silent
        } else {
            by_socket
                .into_iter()
                .map(|c| (c, "a TCP connection of the frozen process(es), from /proc".to_string()))
                .collect()
        };
        let commands = log
            .commands
            .into_iter()
            .map(|(mut c, _)| {
                if let Sender::Other { addr } = &c.by
                    && let Some((_, how)) = worker_addrs.iter().find(|(a, _)| a == addr)
                {
                    c.by = Sender::FrozenWorker {
                        addr: addr.clone(),
                        how: how.clone(),
                    };
                }
                c
            })
            .collect();
        if log.dropped > 0 {
            unavailable.get_or_insert(format!(
                "{} commands past the first {MAX_COMMANDS} were not kept",
                log.dropped
            ));
        }
        Witnessed {
            unavailable,
            worker_addrs,
            commands,
        }
    }
}

impl Drop for Witness {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn phase_of(v: u8) -> Phase {
    match v {
        1 => Phase::Frozen,
        2 => Phase::Thawed,
        _ => Phase::Before,
    }
}

/// One `MONITOR` line into the log: the client's activity, and the command if it touches
/// a key of the namespace (`last`: the client and command that a script's own calls belong to).
fn record(log: &mut Log, pattern: &Glob, seen: Seen, phase: Phase, last: &mut (String, String)) {
    let Some(name) = seen
        .args
        .first()
        .map(|n| String::from_utf8_lossy(n).to_ascii_uppercase())
    else {
        return;
    };
    let (client, name) = if seen.client == "lua" {
        (last.0.clone(), format!("{}>{}", last.1, name.to_ascii_lowercase()))
    } else {
        *last = (seen.client.clone(), name.clone());
        (seen.client.clone(), name)
    };
    if log.clients.len() < MAX_CLIENTS || log.clients.contains_key(&client) {
        let e = log.clients.entry(client.clone()).or_default();
        e.0 |= phase == Phase::Frozen;
        e.1 |= phase == Phase::Thawed;
    }
    let Some(key) = seen.args.iter().skip(1).find(|a| pattern.matches(a)) else {
        return;
    };
    if log.commands.len() >= MAX_COMMANDS {
        log.dropped += 1;
        return;
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
    let command = Command {
        at_ms: seen.at_us / 1000,
        key: String::from_utf8_lossy(key).into_owned(),
        name,
        by: Sender::Other { addr: client },
    };
    log.commands.push((command, phase));
}
