//! What the status page shows, asked of the read model once and used twice: rendered into
//! the page (`status_page`) and answered as JSON by `GET /api/v1/status`, which the page's
//! script polls to update its numbers, charts and timeline in place.

use std::fmt::Write;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::charts::{self, Metric, esc};
use super::drill_view::{self, DrillView};
use super::freeze_view::{self, FreezeView};
use super::summary::{self, Counts, Level, Line};
use super::{AppState, HttpError, gate};
use crate::locks::TargetLocks;
use crate::locks::incidents::{Incident, Kind};
use crate::locks::recent::wall_ms;
use crate::vocab::UNKNOWN_NAMESPACE;

/// The page's numbers, charts and timeline.
#[derive(Serialize)]
pub(super) struct Status {
    pub(super) generated_ms: i64,
    pub(super) targets: Vec<TargetView>,
    /// One line per target and namespace, worst first.
    pub(super) summary: Vec<Line>,
    pub(super) summary_html: String,
    /// Newest first, all targets and the intake together.
    pub(super) incidents: Vec<IncidentView>,
    /// The incidents as the page shows them: grouped by kind and namespace.
    pub(super) timeline_html: String,
    /// Rotated log files still written while the file at their path is not.
    pub(super) not_reopened: Vec<crate::intake::reopen::NotReopened>,
    /// The drills' live freezes, the earliest first, and their lines for the page's top.
    pub(super) drill_freezes: Vec<FreezeView>,
    pub(super) drill_freezes_html: String,
    /// The drills' recorded results, unsafe first, and their section of the page.
    pub(super) drills: Vec<DrillView>,
    pub(super) drills_html: String,
}

#[derive(Serialize)]
pub(super) struct TargetView {
    pub(super) name: String,
    /// The config's mode: `standalone`, `cluster` or `sentinel`.
    pub(super) topology: &'static str,
    /// Which servers its primaries are (`lockwatch_target_info`); empty until told.
    pub(super) servers: Vec<ServerView>,
    /// `events` or `scan`.
    pub(super) mode: &'static str,
    /// Whether keyspace notifications are shown to arrive; `None` when they are off.
    pub(super) notifications: Option<NotificationsView>,
    pub(super) namespaces: Vec<NamespaceView>,
}

/// A server among a target's primaries: `redis` or `valkey`, and its version.
#[derive(Serialize)]
pub(super) struct ServerView {
    pub(super) server: &'static str,
    pub(super) version: String,
}

/// The verification of a target's notifications (`lockwatch_notifications_verification`).
#[derive(Serialize)]
pub(super) struct NotificationsView {
    pub(super) state: &'static str,
    pub(super) method: &'static str,
    /// Why, or how, in words.
    pub(super) words: Option<String>,
}

#[derive(Serialize)]
pub(super) struct NamespaceView {
    pub(super) name: String,
    pub(super) state: Level,
    pub(super) held: i64,
    pub(super) overdue: i64,
    pub(super) without_ttl: i64,
    pub(super) too_long: i64,
    pub(super) longest_hold_s: f64,
    pub(super) unreadable: i64,
    /// Expiry takeovers counted since start; `None` when notifications are off.
    pub(super) takeovers: Option<u64>,
    /// Lock failures reported by logs and pushes in the last hour (`EventClass::Failure`:
    /// not owned, stale fence, errors, failed renewals); never contention.
    pub(super) failures_hour: u64,
    /// Acquisitions reported busy or timed out in the last hour (`EventClass::Contention`).
    pub(super) contention_hour: u64,
    /// The charts of the last hour (held, overdue, failures, contention, takeovers).
    pub(super) charts_html: String,
}

#[derive(Serialize)]
pub(super) struct IncidentView {
    pub(super) at_ms: i64,
    pub(super) at: String,
    /// `None` for a burst of failures from logs and pushes (not a target's; contention makes none).
    pub(super) target: Option<String>,
    pub(super) namespace: String,
    pub(super) kind: &'static str,
    pub(super) words: &'static str,
    pub(super) count: u32,
    pub(super) key: Option<String>,
    /// The key's page, relative to the status page.
    pub(super) link: Option<String>,
    /// The trace of the failure behind it (a reported failure's, a burst's latest), when it
    /// came with one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) trace_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) span_id: Option<String>,
}

/// Percent-encode for a query value.
pub(super) fn query_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A key's page, relative to the status page.
pub(super) fn key_link(ns: &str, key: &str) -> String {
    format!("locks/{}?key={}", query_value(ns), query_value(key))
}

pub(super) fn rfc3339(at_ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(at_ms).unwrap_or(0));
    humantime::format_rfc3339_seconds(at).to_string()
}

/// Ask the read model for everything the page shows.
pub(super) fn status(s: &AppState) -> Status {
    let now = wall_ms();
    // The intake's last hour: failures and, apart, contention.
    let reported = s.intake.recent();
    let mut incidents = Vec::new();
    let mut lines = Vec::new();
    let targets = s
        .targets
        .iter()
        .map(|t| {
            let lifecycle = s.lifecycles.iter().find(|l| l.target == t.name);
            let st = t.status();
            let down = st.passes > 0 && !st.up;
            lines.push(target_line(s, t));
            let kept = t.incidents();
            let lost: Vec<&Incident> = kept.iter().filter(|i| i.kind == Kind::LostInFailover).collect();
            for i in &kept {
                let ns = t
                    .namespaces
                    .get(i.namespace)
                    .map(|n| n.config.name.as_str())
                    .unwrap_or("?");
                incidents.push(incident_view(i, Some(&t.name), ns));
            }
            let namespaces = t
                .namespaces
                .iter()
                .enumerate()
                .map(|(i, ns)| {
                    let census = t.census(ns);
                    let hour = t.last_hour(i, now);
                    let events = reported.last_hour(i, now);
                    let charts_html = Metric::ALL
                        .iter()
                        .map(|m| match m {
                            Metric::Failures | Metric::Contention => charts::chart(*m, &events),
                            _ => charts::chart(*m, &hour),
                        })
                        .collect();
                    let sum = |b: &[Option<crate::locks::recent::Bucket>],
                               f: fn(&crate::locks::recent::Bucket) -> u32| {
                        b.iter().flatten().map(|b| u64::from(f(b))).sum::<u64>()
                    };
                    let counts = Counts {
                        overdue: census.overdue,
                        without_ttl: census.without_ttl,
                        too_long: census.too_long,
                        unreadable: census.wrong_type + census.bad_value,
                        takeovers_hour: sum(&hour, |b| b.takeovers),
                        failures_hour: sum(&events, |b| b.failures),
                        contention_hour: sum(&events, |b| b.contention),
                        lost_hour: lost
                            .iter()
                            .filter(|l| l.namespace == i && l.at_ms > now - 3_600_000)
                            .count() as u64,
                    };
                    let (state, mut parts, weight) = summary::namespace_state(&counts, down);
                    parts.push(format!("{} held", census.held));
                    lines.push(Line {
                        state,
                        target: t.name.clone(),
                        namespace: Some(ns.config.name.clone()),
                        source: None,
                        parts,
                        weight,
                    });
                    NamespaceView {
                        name: ns.config.name.clone(),
                        state,
                        held: census.held,
                        overdue: census.overdue,
                        without_ttl: census.without_ttl,
                        too_long: census.too_long,
                        longest_hold_s: census.max_age_ms as f64 / 1000.0,
                        unreadable: census.wrong_type + census.bad_value,
                        takeovers: lifecycle.map(|l| l.takeovers(&ns.config.name)),
                        failures_hour: counts.failures_hour,
                        contention_hour: counts.contention_hour,
                        charts_html,
                    }
                })
                .collect();
            TargetView {
                name: t.name.clone(),
                topology: topology_mode(s, &t.name),
                servers: servers_of(s, &t.name)
                    .iter()
                    .map(|v| ServerView {
                        server: v.family.as_str(),
                        version: v.version.clone(),
                    })
                    .collect(),
                mode: match t.subscription() {
                    Some(_) => "events",
                    None => "scan",
                },
                notifications: lifecycle.map(|l| {
                    let v = l.verification();
                    NotificationsView {
                        state: v.state.as_str(),
                        method: v.method.as_str(),
                        words: v.words,
                    }
                }),
                namespaces,
            }
        })
        .collect();
    let not_reopened = s.intake.not_reopened().all();
    lines.extend(reopen_lines(&not_reopened, now));
    let names: Vec<&str> = s.config.namespaces.iter().map(|n| n.name.as_str()).collect();
    for i in reported.incidents() {
        let ns = names.get(i.namespace).copied().unwrap_or(UNKNOWN_NAMESPACE);
        incidents.push(incident_view(&i, None, ns));
    }
    incidents.sort_by_key(|i| std::cmp::Reverse(i.at_ms));
    let timeline_html = summary::grouped_html(&incidents, s.config.server.trace_url.as_ref());
    let summary_html = summary::summary_html(&mut lines);
    let drill_freezes = freeze_view::views(s.drills.freezes.live(), now);
    let drills = drill_view::views(s.drills.results.list(), now);
    Status {
        drills_html: drill_view::html(&drills),
        drills,
        drill_freezes_html: freeze_view::html(&drill_freezes),
        drill_freezes,
        generated_ms: now,
        targets,
        summary: lines,
        summary_html,
        incidents,
        timeline_html,
        not_reopened,
    }
}

/// A line per log source with rotated files its application did not reopen: which, since
/// when, and how to fix the rotation.
fn reopen_lines(notes: &[crate::intake::reopen::NotReopened], now: i64) -> Vec<Line> {
    let mut lines: Vec<Line> = Vec::new();
    for n in notes {
        let part = format!(
            r#"<span data-part="not-reopened"><code>{}</code> is still written after its rotation and nothing at <code>{}</code> (for {} s): the application did not reopen its log — add <code>copytruncate</code>, or a <code>postrotate</code> that signals it to reopen, to its logrotate config; its lines are counted while the rotated file is followed</span>"#,
            esc(&n.rotated.display().to_string()),
            esc(&n.path.display().to_string()),
            (now - n.since_ms).max(0) / 1000,
        );
        match lines
            .iter_mut()
            .find(|l| l.source.as_deref() == Some(n.source.as_str()))
        {
            Some(l) => {
                l.parts.push(part);
                l.weight += 1;
            }
            None => lines.push(Line {
                state: Level::Warn,
                target: String::new(),
                namespace: None,
                source: Some(n.source.clone()),
                parts: vec![part],
                weight: 1,
            }),
        }
    }
    lines
}

/// A target's line of the summary: its health, tracking mode and keyspace notifications,
/// each a part of its own (`data-part`), so a further state of the target is one more part.
fn target_line(s: &AppState, t: &TargetLocks) -> Line {
    let st = t.status();
    let (mut state, health) = match (st.passes, st.up) {
        (0, _) => (Level::Warn, "waiting for the first pass".to_string()),
        (_, true) => (Level::Ok, r#"<span class="ok">up</span>"#.to_string()),
        (_, false) => (
            Level::Bad,
            format!(
                r#"<span class="down">down</span>: {}"#,
                esc(st.last_error.as_deref().unwrap_or(""))
            ),
        ),
    };
    let (notes_state, notes) = notifications(s, t);
    state = state.min(notes_state);
    let servers: Vec<String> = servers_of(s, &t.name).iter().map(|v| esc(&v.name())).collect();
    let server = match servers.is_empty() {
        true => "server not known yet".to_string(),
        false => servers.join(" and "),
    };
    let parts = vec![
        format!(r#"<span data-part="health">{health}</span>"#),
        format!(
            r#"<span data-part="server">{server}, {}</span>"#,
            topology_mode(s, &t.name)
        ),
        format!(r#"<span data-part="tracking">tracking: {}</span>"#, tracking(t)),
        format!(r#"<span data-part="notifications">notifications: {notes}</span>"#),
    ];
    Line {
        state,
        target: t.name.clone(),
        namespace: None,
        source: None,
        parts,
        weight: 0,
    }
}

/// Which servers the target's primaries are, as the topology follower last asked.
fn servers_of(s: &AppState, target: &str) -> std::sync::Arc<[crate::access::server::Server]> {
    s.nodes
        .iter()
        .find(|(name, _)| name == target)
        .map(|(_, n)| n.servers())
        .unwrap_or_else(|| std::sync::Arc::from([]))
}

/// The target's `mode` in the config.
fn topology_mode(s: &AppState, target: &str) -> &'static str {
    s.config
        .targets
        .iter()
        .find(|t| t.name == target)
        .map_or("standalone", |t| t.topology.mode().as_str())
}

/// The tracking mode in words.
pub(super) fn tracking(t: &TargetLocks) -> &'static str {
    if t.subscription().is_some() {
        r#"<span class="ok" data-mode="events">events</span> — locks followed from keyspace notifications; a slow SCAN reconciles"#
    } else {
        r#"<span data-mode="scan">scan</span> — locks found by SCAN passes"#
    }
}

/// The keyspace notifications of the target in words, and how they stand: subscribed or
/// not, verified or why not (the state of `lockwatch_notifications_verification` as
/// `data-verification`), and the server's setting.
pub(super) fn notifications(s: &AppState, t: &TargetLocks) -> (Level, String) {
    use crate::vocab::{Method, Verification};
    let Some(l) = s.lifecycles.iter().find(|l| l.target == t.name) else {
        return (Level::Ok, "off in config".to_string());
    };
    let v = l.verification();
    let state = v.state.as_str();
    let words = esc(v.words.as_deref().unwrap_or(""));
    let setting = esc(&l.notifications());
    match v.state {
        Verification::Verified => {
            let how = match v.method {
                Method::Canary => "verified by the canary",
                Method::Flags => "verified by the flags",
                Method::Passive => "verified passively",
            };
            let more = if words.is_empty() {
                String::new()
            } else {
                format!(" ({words})")
            };
            (
                Level::Ok,
                format!(
                    r#"<span class="ok" data-verification="{state}">subscribed, receiving</span> — {how}{more}; {setting}"#
                ),
            )
        }
        Verification::Pending => (
            Level::Warn,
            format!(r#"<span data-verification="{state}">subscribed, verifying</span>: {words}; {setting}"#),
        ),
        Verification::NotSubscribed | Verification::PubsubRefused => (
            Level::Warn,
            format!(
                r#"<span class="down" data-verification="{state}">not subscribed</span> ({state}): {words}; {setting}"#
            ),
        ),
        _ => (
            Level::Warn,
            format!(
                r#"<span class="down" data-verification="{state}">subscribed but not receiving</span>: {words} ({state}); {setting}"#
            ),
        ),
    }
}

fn incident_view(i: &Incident, target: Option<&str>, ns: &str) -> IncidentView {
    let key = i.key.as_ref().map(|k| String::from_utf8_lossy(k).into_owned());
    IncidentView {
        at_ms: i.at_ms,
        at: rfc3339(i.at_ms),
        target: target.map(str::to_string),
        namespace: ns.to_string(),
        kind: i.kind.as_str(),
        words: i.kind.words(),
        count: i.count,
        link: key.as_deref().filter(|_| !i.cut).map(|k| key_link(ns, k)),
        key,
        trace_id: i.trace.as_ref().map(|t| t.trace_id.clone()),
        span_id: i.trace.as_ref().and_then(|t| t.span_id.clone()),
    }
}

/// `GET /api/v1/status`: the page's numbers, charts and timeline as JSON, behind the gate.
pub(crate) async fn api(State(s): State<AppState>) -> Response {
    let Ok(_pass) = s.views.enter().await else {
        return gate::Busy.into_response();
    };
    match tokio::task::spawn_blocking(move || status(&s)).await {
        Ok(st) => Json(st).into_response(),
        Err(e) => HttpError(StatusCode::INTERNAL_SERVER_ERROR, format!("status failed: {e}")).into_response(),
    }
}
