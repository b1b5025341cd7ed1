//! Locks lost in a failover: when a new primary takes over, every lock the tables held on
//! the old one (still within its TTL) is read on the new one; each that is not there was
//! acquired on the old primary and never reached the replica that took over. It is
//! counted once, logged with its key and last owner hash, and dropped from the table, so
//! no later pass or walk counts it again.
//!
//! Only counted when the tables were current: events mode up to the moment the old primary
//! went away. In scan mode a lock released since the last pass looks the same as a lost one.

use super::Sampler;
use crate::access::read::KeyRead;
use crate::topology::Failover;
use crate::vocab::TrackingMode;

impl Sampler {
    /// Compare the locks held before `f` with what the new primary has.
    pub(super) async fn failover(&mut self, f: &Failover) -> redis::RedisResult<()> {
        let reader = self.reader()?;
        let exact = self.last_ok_mode == Some(TrackingMode::Events);
        for (i, ns_locks) in self.locks.namespaces.iter().enumerate() {
            let ns = &ns_locks.config;
            let now = self.locks.now_ms();
            let held: Vec<(Box<[u8]>, u64)> = ns_locks
                .table()
                .locks()
                .filter(|(k, e)| e.known() && e.pttl_at(now) != 0 && f.covers(k))
                .map(|(k, e)| (Box::from(k), e.owner))
                .collect();
            if held.is_empty() {
                continue;
            }
            let keys: Vec<Vec<u8>> = held.iter().map(|(k, _)| k.to_vec()).collect();
            let reads = reader.read_locks(&ns.value, &keys).await?;
            let mut lost = 0u64;
            let mut table = ns_locks.table();
            for ((key, owner), read) in held.iter().zip(&reads) {
                if *read != KeyRead::Gone {
                    continue;
                }
                let key_text = String::from_utf8_lossy(key);
                if exact {
                    lost += 1;
                    table.forget(key);
                    self.locks.record_lost(i, key);
                    tracing::warn!(target_name = %self.target.name, namespace = %ns.name, key = %key_text,
                        last_owner = %format!("{owner:016x}"), from = %f.from, to = %f.to,
                        "lock lost in failover: held on the old primary, absent on the new one; its holder may still be working while another takes it — only fencing protects the resource");
                } else {
                    tracing::warn!(target_name = %self.target.name, namespace = %ns.name, key = %key_text,
                        last_owner = %format!("{owner:016x}"), from = %f.from, to = %f.to,
                        "lock held at the last scan pass is absent on the new primary: lost in the failover or released since that pass (scan mode cannot tell); not counted");
                }
            }
            drop(table);
            if lost > 0 {
                self.metrics.lost_in_failover(&self.target.name, &ns.name, lost);
            }
            tracing::info!(target_name = %self.target.name, namespace = %ns.name, checked = held.len(), lost,
                from = %f.from, to = %f.to, "failover: locks held before compared with the new primary");
        }
        Ok(())
    }
}
