//! Whether the woken worker deleted the new owner's lock: a deletion its own connection sent
//! (the witness), or — where no other client was seen releasing — an end of the new
//! owner's hold after the thaw that refusals not the worker's followed; and what those
//! refusals are then (the deletion's consequence).

use super::finding::Finding;
use super::held::{LATE_MS, secs};
use super::seen::{Command, KeySeen, Sender, Transition};
use super::verdict::{Evidence, LockVerdict};

/// After a deletion, the refusals of the key are the new owner's finding its lock gone:
/// the ones not tied to the woken worker are said to be the deletion's consequence.
pub fn credit_after_deletion(v: &mut LockVerdict) {
    let Some(at) = v.deleted_ms else { return };
    let after: Vec<String> = v
        .not_credited
        .iter()
        .filter(|r| r.at_ms >= at)
        .map(|r| r.what.clone())
        .collect();
    if !after.is_empty() {
        v.notes.push(format!(
            "the refusals after the deletion ({}) are not the woken worker's: the deletion's consequence (another holder found its lock gone), never evidence of safety",
            after.join(", ")
        ));
    }
}

/// The new owner's lock deleted or replaced after the thaw: by the woken worker's
/// connection (the witness), or — without the witness — a deletion that refusals not tied
/// to the worker followed.
pub fn deletion(
    k: &KeySeen,
    v: &mut LockVerdict,
    takeover: &Transition,
    end: Option<&Transition>,
    woken: &[&Command],
    ev: &Evidence<'_>,
) -> Option<Finding> {
    let w = &ev.window;
    let ended_at = end.map(|t| t.at_ms);
    let by_worker = woken
        .iter()
        .find(|c| c.deletes() && c.at_ms > takeover.at_ms && ended_at.is_none_or(|e| c.at_ms <= e + LATE_MS));
    if let Some(c) = by_worker {
        v.deleted_ms = Some(c.at_ms);
        let how = match &c.by {
            Sender::FrozenWorker { how, .. } => how.as_str(),
            Sender::Other { .. } => "",
        };
        v.deleted_how = Some(format!(
            "{} sent by the woken worker's connection {} ({how}), seen by MONITOR",
            c.name,
            c.addr()
        ));
        return Some(Finding::DeletedNewOwnersLock);
    }
    let e = end.filter(|e| e.at_ms >= w.thawed_ms && e.kind != "expired" && e.kind != "evicted")?;
    let witnessed_other = ev
        .witness
        .commands
        .iter()
        .any(|c| c.key == k.key && c.releases() && !c.by_worker() && (c.at_ms - e.at_ms).abs() <= LATE_MS);
    if witnessed_other {
        // Another client's release or deletion made it: the new owner's release.
        return None;
    }
    let after: Vec<String> = match &k.events {
        Some(_) => v
            .not_credited
            .iter()
            .filter(|r| r.at_ms > e.at_ms)
            .map(|r| r.what.clone())
            .collect(),
        None => ev
            .counted
            .iter()
            .filter(|x| x.at_ms > e.at_ms && x.at_ms <= w.end_ms)
            .map(|x| format!("{} {} ×{} (counted for the namespace)", x.op, x.outcome, x.by))
            .collect(),
    };
    let replaced = e.kind == "acquired";
    if !replaced && after.is_empty() {
        return None;
    }
    v.deleted_ms = Some(e.at_ms);
    v.deleted_how = Some(if replaced {
        "the new owner's token was replaced without a release after the thaw (a SET without NX)".into()
    } else {
        format!(
            "the new owner's lock was deleted {} after the thaw, and refusals followed ({}): the new owner found its lock gone, so the deletion was not its release",
            secs(e.at_ms - w.thawed_ms),
            after.join(", ")
        )
    });
    Some(Finding::DeletedNewOwnersLock)
}
