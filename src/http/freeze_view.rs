//! The drills' live freezes as the status page (first thing under its header) and
//! `/api/v1/status` show them: what a drill froze, when and for how long; once the thaw is
//! overdue, or failed, how to thaw it by hand. Every text a drill sent is escaped.

use std::fmt::Write;

use serde::Serialize;

use super::charts::esc;
use super::status_view::rfc3339;
use crate::drills::freezes::{Freeze, Reported};

/// One live freeze, as `/api/v1/status` carries it under `drill_freezes`: its latest
/// record's fields, the planned end and how late its thaw is.
#[derive(Debug, Serialize)]
pub(super) struct FreezeView {
    #[serde(flatten)]
    pub(super) freeze: Freeze,
    /// The planned end: `since_ms + for_ms`.
    pub(super) due_ms: u64,
    /// Whole seconds past the planned end; 0 until then.
    pub(super) overdue_s: u64,
}

/// The views of `live` at `now_ms`.
pub(super) fn views(live: Vec<Freeze>, now_ms: i64) -> Vec<FreezeView> {
    let now = u64::try_from(now_ms).unwrap_or(0);
    live.into_iter()
        .map(|freeze| FreezeView {
            due_ms: freeze.due_ms(),
            overdue_s: now.saturating_sub(freeze.due_ms()) / 1000,
            freeze,
        })
        .collect()
}

/// `20:41:07 UTC`, in a `<time>` with the whole date.
fn clock(ms: u64) -> String {
    let at = rfc3339(i64::try_from(ms).unwrap_or(i64::MAX));
    format!(
        r#"<time datetime="{at}">{} UTC</time>"#,
        at.get(11..19).unwrap_or(at.as_str())
    )
}

/// `8 s`, `2.5 s`.
fn seconds(ms: u64) -> String {
    match ms % 1000 {
        0 => format!("{} s", ms / 1000),
        _ => format!("{:.1} s", ms as f64 / 1000.0),
    }
}

/// What was frozen, in words: `pid 4242`, `cgroup <code>/sys/fs/cgroup/x</code>`.
fn thing(frozen: &str) -> String {
    if let Some(pid) = frozen.strip_prefix("pid:") {
        return format!("pid {}", esc(pid));
    }
    match frozen.strip_prefix("cgroup:") {
        Some(path) => format!("cgroup <code>{}</code>", esc(path)),
        None => "what its freeze command stops".to_string(),
    }
}

/// How to thaw it by hand: the drill's own command, and the kernel's way beside it. A
/// process has none: a ptrace stop ignores SIGCONT (`lockwatch drill --thaw` ends it).
fn by_hand(f: &Freeze) -> String {
    let kernel = if let Some(pid) = f.frozen.strip_prefix("pid:") {
        f.thaw_by_hand
            .is_empty()
            .then(|| format!("lockwatch drill --thaw pid:{pid}"))
    } else {
        f.frozen
            .strip_prefix("cgroup:")
            .map(|path| match path.contains("/freezer/") {
                true => format!("echo THAWED > {path}/freezer.state"),
                false => format!("echo 0 > {path}/cgroup.freeze"),
            })
    };
    match (f.thaw_by_hand.is_empty(), kernel) {
        (false, Some(k)) => format!("<code>{}</code> (or <code>{}</code>)", esc(&f.thaw_by_hand), esc(&k)),
        (false, None) => format!("<code>{}</code>", esc(&f.thaw_by_hand)),
        (true, Some(k)) => format!("<code>{}</code>", esc(&k)),
        (true, None) => "run the drill's thaw command".to_string(),
    }
}

/// The freezes' lines, under a heading of their own; nothing when none is live.
pub(super) fn html(views: &[FreezeView]) -> String {
    if views.is_empty() {
        return String::new();
    }
    let mut h = String::from(
        r#"<h2 id="drill-freezes">drill freezes <small>workers a drill holds stopped now</small></h2><ol class="summary">"#,
    );
    for v in views {
        let f = &v.freeze;
        let failed = f.state == Reported::ThawFailed;
        let level = if failed || v.overdue_s > 0 { "bad" } else { "warn" };
        let what = match f.what.is_empty() {
            true => String::new(),
            false => format!(" ({})", esc(&f.what)),
        };
        let tail = if failed {
            format!(
                r#" — <strong>the thaw failed</strong> ({} at {}): it may be stopped still — thaw it by hand: {}"#,
                f.by.as_str(),
                clock(f.at_ms),
                by_hand(f)
            )
        } else if v.overdue_s > 0 {
            format!(
                r#" — <strong>thaw overdue by {} s</strong> — thaw it by hand: {}"#,
                v.overdue_s,
                by_hand(f)
            )
        } else {
            format!("; thaw due at {}", clock(v.due_ms))
        };
        let _ = write!(
            h,
            r#"<li class="line lvl-{level}" data-freeze="{id}" data-state="{state}"><span class="mark">❄</span> <b class="what">{target} / {ns}</b> — a drill froze {thing}{what} at {since} for {for_}{tail}</li>"#,
            id = esc(&f.id),
            state = f.state.as_str(),
            target = esc(&f.target),
            ns = esc(&f.namespace),
            thing = thing(&f.frozen),
            since = clock(f.since_ms),
            for_ = seconds(f.for_ms),
        );
    }
    h.push_str("</ol>");
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drills::freezes::By;

    fn freeze(frozen: &str, state: Reported, thaw: &str) -> Freeze {
        Freeze {
            id: "d-1".into(),
            target: "staging".into(),
            namespace: "pay<outs>".into(),
            frozen: frozen.into(),
            what: "process 4242 (<script>alert(1)</script>)".into(),
            since_ms: 1_732_826_467_000,
            for_ms: 8000,
            at_ms: 1_732_826_475_010,
            by: By::Watchdog,
            state,
            thaw_by_hand: thaw.into(),
        }
    }

    fn line(f: Freeze, now_ms: i64) -> String {
        html(&views(vec![f], now_ms))
    }

    #[test]
    fn live_overdue_and_failed_in_words_escaped() {
        let (landed, late) = (1_732_826_470_000, 1_732_826_548_000);
        let cases = [
            (
                freeze("pid:4242", Reported::Frozen, ""),
                landed,
                vec![
                    "lvl-warn",
                    "staging / pay&lt;outs&gt;",
                    "a drill froze pid 4242 (process 4242 (&lt;script&gt;alert(1)&lt;/script&gt;)) at <time datetime=\"2024-11-28T20:41:07Z\">20:41:07 UTC</time> for 8 s; thaw due at",
                ],
            ),
            (
                freeze("pid:4242", Reported::Frozen, "lockwatch drill --thaw pid:4242"),
                late,
                vec![
                    "lvl-bad",
                    "thaw overdue by 73 s</strong> — thaw it by hand: <code>lockwatch drill --thaw pid:4242</code>",
                ],
            ),
            (
                freeze("cgroup:/sys/fs/cgroup/w", Reported::ThawFailed, ""),
                landed,
                vec![
                    "lvl-bad",
                    "a drill froze cgroup <code>/sys/fs/cgroup/w</code>",
                    "the thaw failed</strong> (watchdog at <time datetime=\"2024-11-28T20:41:15Z\">20:41:15 UTC</time>)",
                    "<code>echo 0 &gt; /sys/fs/cgroup/w/cgroup.freeze</code>",
                ],
            ),
            (
                freeze("cmd", Reported::Frozen, "sh thaw.sh"),
                late,
                vec!["what its freeze command stops", "<code>sh thaw.sh</code>"],
            ),
        ];
        for (f, now, parts) in cases {
            let h = line(f, now);
            assert!(!h.contains("<script>"), "{h}");
            for part in parts {
                assert!(h.contains(part), "{part}\nnot in\n{h}");
            }
        }
        assert_eq!(html(&[]), "");
        assert_eq!(seconds(2500), "2.5 s");
    }
}
