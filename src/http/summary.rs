//! What the status page leads with: one line per target and per namespace stating its state
//! (bad, warn, ok) in words, worst first; and the incidents grouped by kind, target and
//! namespace (a count, first and last time, the keys behind a `<details>`), so repeats add
//! to a count instead of pushing the summary down. Pure: views in, markup out.

use std::fmt::Write;

use serde::Serialize;

use super::charts::esc;
use super::status_view::IncidentView;

/// How a line stands; the order is the page's (worst first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Level {
    Bad,
    Warn,
    Ok,
}

impl Level {
    fn as_str(self) -> &'static str {
        match self {
            Level::Bad => "bad",
            Level::Warn => "warn",
            Level::Ok => "ok",
        }
    }
}

/// A namespace's numbers the state is judged from.
#[derive(Debug, Clone, Default)]
pub(super) struct Counts {
    pub overdue: i64,
    pub without_ttl: i64,
    pub too_long: i64,
    pub unreadable: i64,
    /// Expiry takeovers and lock failures (logs, pushes) in the last hour.
    pub takeovers_hour: u64,
    pub failures_hour: u64,
    /// Acquisitions reported busy or timed out in the last hour: contention, said but never
    /// a reason for warn or bad.
    pub contention_hour: u64,
    /// Locks lost in a failover in the last hour.
    pub lost_hour: u64,
}

/// The words of contention on a namespace's line (`data-part="contention"`).
fn contention_words(n: u64) -> String {
    format!(
        r#"<span class="quiet" data-part="contention" title="contention: acquisitions that found the lock held (busy) or gave up waiting for it (timeout); the lock working, not a failure">{n} acquisition{s} waited or gave up in the last hour</span>"#,
        s = if n == 1 { "" } else { "s" }
    )
}

/// A namespace's state, what makes it so (most serious first; contention last, which makes
/// nothing), and its weight among lines of the same state: the count of what made it bad
/// (or, for warn, of what warns). An ok namespace's parts start with its `ok`.
pub(super) fn namespace_state(c: &Counts, target_down: bool) -> (Level, Vec<String>, u64) {
    let mut bad = Vec::new();
    let mut warn = Vec::new();
    let say = |list: &mut Vec<String>, n: u64, words: &str| {
        if n > 0 {
            list.push(format!("{n} {words}"));
        }
    };
    let n = |v: i64| u64::try_from(v).unwrap_or(0);
    if target_down {
        bad.push("target down: numbers as of the last pass".to_string());
    }
    say(&mut bad, c.lost_hour, "lost in a failover in the last hour");
    say(&mut bad, c.takeovers_hour, "expiry takeovers in the last hour");
    say(&mut bad, n(c.overdue), "renewal overdue");
    say(&mut bad, n(c.without_ttl), "without TTL");
    say(&mut warn, c.failures_hour, "lock failures reported in the last hour");
    say(&mut warn, n(c.too_long), "held too long");
    say(&mut warn, n(c.unreadable), "unreadable keys");
    let (state, weight) = if !bad.is_empty() {
        (
            Level::Bad,
            c.lost_hour + c.takeovers_hour + n(c.overdue) + n(c.without_ttl),
        )
    } else if !warn.is_empty() {
        (Level::Warn, c.failures_hour + n(c.too_long) + n(c.unreadable))
    } else {
        (Level::Ok, 0)
    };
    let mut parts = bad;
    if state == Level::Ok {
        parts.push(r#"<span class="ok">ok</span>"#.to_string());
    }
    parts.extend(warn);
    if c.contention_hour > 0 {
        parts.push(contention_words(c.contention_hour));
    }
    (state, parts, weight)
}

/// One line of the summary.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Line {
    pub state: Level,
    pub target: String,
    /// `None` for the target's own line.
    pub namespace: Option<String>,
    /// A `[[logs]]` source's line (then `target` is empty): what its files say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The line's parts, already markup: the state's words first.
    pub parts: Vec<String>,
    /// Among lines of the same state, the heavier first.
    pub weight: u64,
}

/// The summary: every line, worst first — by state, then weight (a target's line before
/// its namespaces' at equal state and weight), then name.
pub(super) fn summary_html(lines: &mut [Line]) -> String {
    lines.sort_by_key(|l| {
        (
            l.state,
            std::cmp::Reverse(l.weight),
            l.namespace.is_some(),
            l.target.clone(),
            l.namespace.clone(),
        )
    });
    let mut h = String::from(r#"<ol class="summary">"#);
    for l in lines.iter() {
        let (what, ns_attr) = match (&l.namespace, &l.source) {
            (Some(ns), _) => (
                format!("{} / {}", esc(&l.target), esc(ns)),
                format!(r#" data-ns="{}""#, esc(ns)),
            ),
            (None, Some(source)) => (
                format!("logs {}", esc(source)),
                format!(r#" data-source="{}""#, esc(source)),
            ),
            (None, None) => (format!("target {}", esc(&l.target)), String::new()),
        };
        let _ = write!(
            h,
            r#"<li class="line lvl-{state}" data-state="{state}" data-target="{target}"{ns_attr}><span class="mark">{mark}</span> <b class="what">{what}</b> — <span class="parts">{parts}</span></li>"#,
            state = l.state.as_str(),
            mark = match l.state {
                Level::Bad => "✖",
                Level::Warn => "▲",
                Level::Ok => "✔",
            },
            target = esc(&l.target),
            parts = l.parts.join(" · "),
        );
    }
    h.push_str("</ol>");
    h
}

/// Incidents grouped by kind, target and namespace, the group with the latest first. Each
/// group: its words, how many incidents (and their total count), first and last time, and
/// its distinct keys behind a `<details>`.
pub(super) fn grouped_html(incidents: &[IncidentView], trace_url: Option<&crate::config::TraceUrl>) -> String {
    if incidents.is_empty() {
        return r#"<p class="quiet">no incidents since lockwatch started</p>"#.to_string();
    }
    struct Group<'a> {
        first: &'a IncidentView,
        last: &'a IncidentView,
        times: u32,
        total: u64,
        keys: Vec<&'a IncidentView>,
        /// The newest member with a trace.
        traced: Option<&'a IncidentView>,
    }
    let mut groups: Vec<Group<'_>> = Vec::new();
    // Newest first in, so a group's first member seen is its last incident.
    for i in incidents {
        let same =
            |g: &&mut Group<'_>| g.last.kind == i.kind && g.last.target == i.target && g.last.namespace == i.namespace;
        match groups.iter_mut().find(|g| same(g)) {
            Some(g) => {
                g.first = i;
                g.times += 1;
                g.total += u64::from(i.count);
                if i.key.is_some() && !g.keys.iter().any(|k| k.key == i.key) {
                    g.keys.push(i);
                }
                if g.traced.is_none() && i.trace_id.is_some() {
                    g.traced = Some(i);
                }
            }
            None => groups.push(Group {
                first: i,
                last: i,
                times: 1,
                total: u64::from(i.count),
                keys: if i.key.is_some() { vec![i] } else { Vec::new() },
                traced: i.trace_id.is_some().then_some(i),
            }),
        }
    }
    let mut h = String::from(r#"<ol class="timeline">"#);
    for g in &groups {
        let i = g.last;
        let hms = |v: &IncidentView| v.at.get(11..19).unwrap_or(&v.at).to_string();
        let _ = write!(
            h,
            r#"<li class="incident {kind}" data-kind="{kind}" data-ns="{ns}" data-times="{times}"><span class="what">{words}</span> <span class="where">{target}{ns}</span>"#,
            kind = i.kind,
            words = i.words,
            ns = esc(&i.namespace),
            times = g.times,
            target = i
                .target
                .as_deref()
                .map(|t| format!("{} / ", esc(t)))
                .unwrap_or_default(),
        );
        if g.times > 1 {
            let _ = write!(h, r#" <span class="count">×{}</span>"#, g.times);
        }
        if g.total > u64::from(g.times) {
            let _ = write!(h, r#" <small>({} in all)</small>"#, g.total);
        }
        if g.times > 1 {
            let _ = write!(
                h,
                r#" <small>first <time datetime="{}">{}</time>, last <time datetime="{}">{}</time></small>"#,
                esc(&g.first.at),
                hms(g.first),
                esc(&i.at),
                hms(i)
            );
        } else {
            let _ = write!(h, r#" <time datetime="{}">{}</time>"#, esc(&i.at), hms(i));
        }
        if let Some(t) = g.traced
            && let Some(id) = &t.trace_id
        {
            let _ = write!(
                h,
                r#" <span class="trace-of">{}{}</span>"#,
                if g.times > 1 { "latest " } else { "" },
                super::trace_link::html(trace_url, id, t.span_id.as_deref())
            );
        }
        if !g.keys.is_empty() {
            let _ = write!(
                h,
                r#" <details><summary>{} key{}</summary><div class="keys">"#,
                g.keys.len(),
                if g.keys.len() == 1 { "" } else { "s" }
            );
            for k in &g.keys {
                let key = k.key.as_deref().unwrap_or("");
                match &k.link {
                    Some(link) => {
                        let _ = write!(h, r#"<a class="key" href="{}">{}</a> "#, esc(link), esc(key));
                    }
                    None => {
                        let _ = write!(h, r#"<code class="key">{}…</code> "#, esc(key));
                    }
                }
            }
            h.push_str("</div></details>");
        }
        h.push_str("</li>");
    }
    h.push_str("</ol>");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inc(at_ms: i64, kind: &'static str, ns: &str, key: Option<&str>) -> IncidentView {
        IncidentView {
            at_ms,
            at: super::super::status_view::rfc3339(at_ms),
            target: Some("main".into()),
            namespace: ns.into(),
            kind,
            words: kind,
            count: 1,
            key: key.map(str::to_string),
            link: key.map(|k| format!("locks/{ns}?key={k}")),
            trace_id: None,
            span_id: None,
        }
    }

    #[test]
    fn states_worst_first() {
        let (s, why, weight) = namespace_state(
            &Counts {
                overdue: 2,
                failures_hour: 3,
                ..Counts::default()
            },
            false,
        );
        assert_eq!((s, weight), (Level::Bad, 2));
        assert_eq!(why, ["2 renewal overdue", "3 lock failures reported in the last hour"]);
        // Contention alone leaves a namespace ok, said in its own words.
        let (s, why, weight) = namespace_state(
            &Counts {
                contention_hour: 40,
                ..Counts::default()
            },
            false,
        );
        assert_eq!((s, weight, why.len()), (Level::Ok, 0, 2), "{why:?}");
        assert!(why[0].contains(">ok<") && why[1].contains(">40 acquisitions waited or gave up in the last hour<"));
        assert!(!why.concat().contains("lock failures"), "{why:?}");
        // One failure beside it warns, the contention still apart.
        let (s, why, weight) = namespace_state(
            &Counts {
                contention_hour: 40,
                failures_hour: 1,
                ..Counts::default()
            },
            false,
        );
        assert_eq!((s, weight), (Level::Warn, 1));
        assert_eq!(why[0], "1 lock failures reported in the last hour");
        assert!(why[1].contains("40 acquisitions waited"), "{why:?}");
        assert_eq!(
            namespace_state(
                &Counts {
                    too_long: 1,
                    ..Counts::default()
                },
                false
            )
            .0,
            Level::Warn
        );
        assert_eq!(
            namespace_state(&Counts::default(), false),
            (Level::Ok, vec![r#"<span class="ok">ok</span>"#.to_string()], 0)
        );
        assert_eq!(namespace_state(&Counts::default(), true).0, Level::Bad);
        let line = |state, ns: Option<&str>, weight| Line {
            state,
            target: "main".into(),
            namespace: ns.map(str::to_string),
            source: None,
            parts: vec![],
            weight,
        };
        let mut lines = vec![
            line(Level::Ok, Some("a"), 0),
            line(Level::Bad, Some("b"), 3),
            line(Level::Ok, None, 0),
            line(Level::Bad, Some("c"), 61),
        ];
        let h = summary_html(&mut lines);
        let at = |s: &str| h.find(s).unwrap_or(usize::MAX);
        let order = [
            at(r#"data-ns="c""#),
            at(r#"data-ns="b""#),
            at(r#"data-target="main">"#),
            at(r#"data-ns="a""#),
        ];
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{h}");
    }

    #[test]
    fn repeats_group_into_one_line_with_first_last_and_keys() {
        let mut v: Vec<IncidentView> = (0..300)
            .rev()
            .map(|i| {
                inc(
                    1_700_000_000_000 + i * 1000,
                    "takeover",
                    "wf",
                    Some(&format!("wf:lock:{}", i % 7)),
                )
            })
            .collect();
        v.insert(0, inc(1_700_000_400_000, "failure_burst", "wf", None));
        let h = grouped_html(&v, None);
        assert_eq!(h.matches("<li ").count(), 2, "{h}");
        assert!(
            h.contains(r#"data-times="300""#) && h.contains("×300") && h.contains("7 keys"),
            "{h}"
        );
        assert!(h.find("failure_burst").unwrap_or(usize::MAX) < h.find("takeover").unwrap_or(0));
        assert!(h.contains("first <time") && h.contains(">22:13:20</time>"), "{h}");
    }
}
