//! The witness: `MONITOR` on every primary from before the freeze to the end of the
//! observation, keeping every command on the namespace's keys — sent alone, pipelined,
//! inside `MULTI`/`EXEC`, or by a script (its `KEYS`, or its own calls) — with the client
//! that sent it. A client is tied to the frozen worker when first heard: its address is one
//! of the worker's TCP sockets in `/proc` (so pools and reconnects after the thaw are its
//! too); one that touched a key and could not be tied either way is said, and so the
//! witness is unsure. At the end a marker sent through each node shows its output was read
//! to the end. Bounded; when the server refuses `MONITOR` the drill goes on without it.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::reader::{Last, Log, MAX_CLIENTS, MAX_COMMANDS, Reader, Tied, worker_pids};
use super::seen::{Sender, Witnessed};
use super::sockets;
use super::target::Frozen;
use crate::access::connect::Link;
use crate::config::TargetConfig;
use crate::glob::Glob;

/// How long the end marker may take to come back through a node's `MONITOR`.
const DRAIN: Duration = Duration::from_secs(3);

/// Where the drill is, as the witness tags what it sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    Before = 0,
    Frozen = 1,
    Thawed = 2,
}

/// The running witness.
pub struct Witness {
    phase: Arc<AtomicU8>,
    /// The worker's processes found after a freeze by commands.
    found: Arc<Mutex<Vec<i32>>>,
    log: Arc<Mutex<Log>>,
    stop: CancellationToken,
    /// Per node: its link (to send the end marker), and its task.
    tasks: Vec<(Link, JoinHandle<Option<String>>)>,
    marker: String,
    refused: Option<String>,
}

impl Witness {
    /// `MONITOR` on each primary of `t`, keeping commands on keys `pattern` matches and
    /// tying clients to the processes of `frozen`. A node that refuses is said in
    /// [`Witnessed::unavailable`].
    pub async fn start(t: &TargetConfig, pattern: Glob, frozen: &Frozen) -> Witness {
        let marker = format!(
            "lockwatch-witness-end-{}-{}",
            std::process::id(),
            crate::locks::recent::wall_ms()
        );
        let mut w = Witness {
            phase: Arc::new(AtomicU8::new(Phase::Before as u8)),
            found: Arc::default(),
            log: Arc::default(),
            stop: CancellationToken::new(),
            tasks: vec![],
            marker,
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
            let offset_us = clock_offset(&link).await;
            let reader = Reader {
                offset_us,
                phase: w.phase.clone(),
                log: w.log.clone(),
                pattern: pattern.clone(),
                frozen: frozen.clone(),
                found: w.found.clone(),
                marker: w.marker.clone(),
                last: Last::default(),
            };
            let stop = w.stop.clone();
            let task = tokio::spawn(async move {
                let mut stream = stream;
                let mut reader = reader;
                loop {
                    tokio::select! {
                        () = stop.cancelled() => return Some(format!("{node}'s MONITOR output was not read to its end (the end marker did not come back within {}s)", DRAIN.as_secs())),
                        line = stream.next() => match line {
                            None => return Some(format!("{node} closed the MONITOR connection")),
                            Some(seen) => if reader.read(seen) {
                                return None;
                            }
                        }
                    }
                }
            });
            w.tasks.push((link, task));
        }
        w
    }

    /// The processes a freeze by commands stopped (found in `/proc`): the worker's.
    pub fn worker_found(&self, pids: Vec<i32>) {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        tie_known(&mut log, &pids);
        *self.found.lock().unwrap_or_else(|p| p.into_inner()) = pids;
    }

    /// The drill moved on: what comes next is tagged so.
    pub fn enter(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::Relaxed);
    }

    /// Send the end marker through every node, read each `MONITOR` up to it, then attribute:
    /// clients tied to the frozen worker's sockets are its; where none were (its processes
    /// unknown, NAT), those silent while it was frozen and heard after the thaw.
    pub async fn finish(mut self, frozen: &Frozen) -> Witnessed {
        let unavailable = self.refused.take();
        let mut unsure = Vec::new();
        // The marker's own connections are the drill's: left out below.
        let mut own = Vec::new();
        for (link, _) in &self.tasks {
            let sent = match link.once().await {
                Ok(mut c) => {
                    let info: redis::RedisResult<String> = redis::cmd("CLIENT").arg("INFO").query_async(&mut c).await;
                    if let Some(addr) = info.ok().as_deref().and_then(client_info_addr) {
                        own.push(addr.to_string());
                    }
                    redis::cmd("ECHO")
                        .arg(&self.marker)
                        .query_async::<redis::Value>(&mut c)
                        .await
                        .map(|_| ())
                }
                Err(e) => Err(e),
            };
            if let Err(e) = sent {
                unsure.push(format!("the end marker could not be sent to {} ({e})", link.node()));
            }
        }
        let stop = self.stop.clone();
        let deadline = tokio::spawn(async move {
            tokio::time::sleep(DRAIN).await;
            stop.cancel();
        });
        for (_, t) in self.tasks.drain(..) {
            if let Ok(Some(why)) = t.await {
                unsure.push(why);
            }
        }
        deadline.abort();
        let mut log = std::mem::take(&mut *self.log.lock().unwrap_or_else(|p| p.into_inner()));
        for a in &own {
            log.clients.remove(a);
        }
        // Clients heard before the worker's processes were known: tied now, by the sockets
        // they still hold.
        let pids = worker_pids(frozen, &self.found);
        tie_known(&mut log, &pids);
        let looked = !pids.is_empty();
        let tied: Vec<String> = log
            .clients
            .iter()
            .filter(|(_, c)| c.tied == Tied::Worker)
            .map(|(a, _)| a.clone())
            .collect();
        let worker_addrs: Vec<(String, String)> = if tied.is_empty() {
            let mut silent: Vec<(String, String)> = log
                .clients
                .iter()
                .filter(|(a, c)| c.spoke_after && !c.spoke_frozen && a.as_str() != "lua")
                .filter(|(_, c)| c.tied != Tied::Other)
                .map(|(a, _)| {
                    (
                        a.clone(),
                        "silent while the worker was frozen, heard after the thaw".to_string(),
                    )
                })
                .collect();
            silent.sort();
            silent
        } else {
            let mut t: Vec<(String, String)> = tied
                .into_iter()
                .map(|a| (a, "a TCP connection of the frozen process(es), from /proc".to_string()))
                .collect();
            t.sort();
            t
        };
        let touched_after = log.clients.iter().any(|(a, c)| c.touched && a.as_str() != "lua");
        let none_tied = !log.clients.values().any(|c| c.tied == Tied::Worker);
        match looked {
            true if none_tied && touched_after => unsure.push(
                "none of the clients that sent commands on the namespace's keys could be tied to the worker's sockets (a NAT or a proxy between the worker and Redis?)".into(),
            ),
            false if touched_after => unsure.push(
                "the worker's processes are not known here: its connections were told only by their silence while it was frozen".into(),
            ),
            _ => {}
        }
        if log.unread > 0 {
            unsure.push(format!("{} MONITOR line(s) could not be read", log.unread));
        }
        if log.orphans > 0 {
            unsure.push(format!(
                "{} call(s) a script made on the keys came after no script call the witness saw (a server that does not show FCALL?): their client is not known",
                log.orphans
            ));
        }
        if log.overflow {
            unsure.push(format!(
                "more than {MAX_CLIENTS} clients spoke: the others were not followed"
            ));
        }
        if looked {
            let mut lost: Vec<&String> = log
                .clients
                .iter()
                .filter(|(_, c)| c.tied == Tied::Unknown && c.touched)
                .map(|(a, _)| a)
                .collect();
            lost.sort();
            if !lost.is_empty() {
                unsure.push(format!(
                    "{} client(s) that sent commands on the namespace's keys were gone before they could be tied to a process ({})",
                    lost.len(),
                    lost.iter().take(5).map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                ));
            }
        }
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
            unsure.push(format!(
                "{} commands past the first {MAX_COMMANDS} were not kept",
                log.dropped
            ));
        }
        Witnessed {
            ran: unavailable.is_none(),
            unavailable,
            unsure,
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

/// Tie every client not yet looked up whose address is one of `pids`' sockets now.
fn tie_known(log: &mut Log, pids: &[i32]) {
    if pids.is_empty() {
        return;
    }
    log.worker.extend(sockets::local_addrs(pids));
    let Log { clients, worker, .. } = log;
    for (a, c) in clients.iter_mut().filter(|(_, c)| c.tied == Tied::NotLooked) {
        if sockets::client_addr(a).is_some_and(|a| worker.contains(&a)) {
            c.tied = Tied::Worker;
        }
    }
}

/// How far the node's clock is ahead of this host's, in microseconds (`TIME`, taken at the
/// middle of its round trip); 0 when it cannot be asked.
async fn clock_offset(link: &Link) -> i64 {
    let Ok(mut c) = link.once().await else { return 0 };
    let before = wall_us();
    let time: redis::RedisResult<(String, String)> = redis::cmd("TIME").query_async(&mut c).await;
    let after = wall_us();
    match time {
        Ok((secs, micros)) => match (secs.parse::<i64>(), micros.parse::<i64>()) {
            (Ok(s), Ok(u)) => s * 1_000_000 + u - (before + after) / 2,
            _ => 0,
        },
        Err(_) => 0,
    }
}

fn wall_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// The `addr=` of a `CLIENT INFO` answer.
fn client_info_addr(info: &str) -> Option<&str> {
    info.split_whitespace().find_map(|f| f.strip_prefix("addr="))
}

#[cfg(test)]
#[path = "witness_tests.rs"]
mod tests;
