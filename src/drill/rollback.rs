//! The rollback, run whatever happened (a deviation, an error, a cancelled run): the network
//! proxy is closed (a request it still held never reaches Redis), worker A is continued
//! (SIGCONT) and ended, and exactly the keys the run created are deleted — never a key
//! outside the run's prefix. What it did goes to the report and the narrator.

use super::narrator::{Narrator, Said};
use super::session::Session;

pub(crate) async fn rollback(s: &mut Session<'_>, narrator: &mut dyn Narrator) {
    if let Some(p) = s.proxy.take() {
        let addr = p.addr;
        p.close().await;
        s.report
            .rollback
            .push(format!("network proxy {addr} closed (anything it held dropped)"));
    }
    s.lease.stop();
    if let Some(w) = s.worker.take() {
        let pid = w.pid;
        let ended = w.end().await;
        s.report.rollback.push(match ended {
            Ok(()) => format!("worker A (pid {pid}) continued and ended"),
            Err(e) => format!("worker A (pid {pid}): {e}"),
        });
    }
    let mut keys = std::mem::take(&mut s.created);
    keys.sort();
    keys.dedup();
    if !keys.is_empty() {
        let deleted: redis::RedisResult<i64> = redis::cmd("DEL").arg(&keys).query_async(&mut s.conn).await;
        s.report.rollback.push(match deleted {
            Ok(n) => format!(
                "deleted {n} of the run's {} keys (the others were gone already)",
                keys.len()
            ),
            Err(e) => format!("could not delete the run's keys ({e}): {}", keys.join(" ")),
        });
    }
    narrator.say(Said::RolledBack(&s.report.rollback));
}
