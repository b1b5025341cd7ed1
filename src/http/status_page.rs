//! `GET /`: a small HTML status page for when Grafana is not at hand — targets, their
//! health, per namespace the held / overdue / without-TTL counts of the last pass, the lock
//! failures reported by logs and pushes, and what each log source read.

use std::fmt::Write;
use std::time::SystemTime;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

use super::{AppState, HttpError, gate};

use crate::duration;
use crate::vocab::{LineResult, PUSH_SOURCE, UNKNOWN_NAMESPACE};
use crate::vocab::{Op, Outcome};

fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn ago(t: Option<SystemTime>) -> String {
    match t.and_then(|t| t.elapsed().ok()) {
        Some(d) => format!("{} ago", duration::format(std::time::Duration::from_secs(d.as_secs()))),
        None => "never".to_string(),
    }
}

/// The page, built on the blocking pool (each namespace's census walks its table in
/// events mode), at most `gate::RUNNING` at once.
pub(crate) async fn page(State(s): State<AppState>) -> Response {
    let Ok(_pass) = s.views.enter().await else {
        return gate::Busy.into_response();
    };
    match tokio::task::spawn_blocking(move || render(&s)).await {
        Ok(h) => Html(h).into_response(),
        Err(e) => HttpError(StatusCode::INTERNAL_SERVER_ERROR, format!("status page failed: {e}")).into_response(),
    }
}

fn render(s: &AppState) -> String {
    let mut h = String::with_capacity(8 * 1024);
    let _ = write!(
        h,
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="10">
<title>lockwatch</title><style>
body{{font-family:system-ui,sans-serif;margin:2em;color:#222}} table{{border-collapse:collapse;margin:1em 0}}
th,td{{border:1px solid #ccc;padding:.3em .7em;text-align:right}} th:first-child,td:first-child{{text-align:left}}
.bad{{background:#fdd;font-weight:bold}} .ok{{color:#070}} .down{{color:#b00;font-weight:bold}} code{{background:#f4f4f4}}
</style></head><body><h1>lockwatch</h1>
<p>version {} · <a href="/metrics">/metrics</a> · <a href="/api/v1/locks">/api/v1/locks</a> · <a href="/readyz">/readyz</a> · <a href="/healthz">/healthz</a></p>
"#,
        env!("CARGO_PKG_VERSION")
    );
    for t in s.targets.iter() {
        let st = t.status();
        let health = match (st.passes, st.up) {
            (0, _) => r#"<span>waiting for the first pass</span>"#.to_string(),
            (_, true) => r#"<span class="ok">up</span>"#.to_string(),
            (_, false) => format!(
                r#"<span class="down">down</span>: {}"#,
                esc(st.last_error.as_deref().unwrap_or(""))
            ),
        };
        let _ = write!(
            h,
            r#"<h2 id="target-{name}">target {name}</h2><p><code>{url}</code> — {health}; last pass {ago}, took {took} ms{trunc}</p>
<p>keyspace notifications: {watch}</p>
<p>tracking: {mode}</p>
<table><tr><th>namespace</th><th>held</th><th>renewal overdue</th><th>without TTL</th><th>held too long</th><th>longest hold (s)</th><th>unreadable keys</th><th>expiry takeovers</th><th></th></tr>
"#,
            name = esc(&t.name),
            url = esc(&t.display_url),
            mode = if t.subscription().is_some() {
                r#"<span class="ok" data-mode="events">events</span> — locks followed from keyspace notifications; a slow SCAN reconciles"#
            } else {
                r#"<span data-mode="scan">scan</span> — locks found by SCAN passes"#
            },
            ago = ago(st.last_pass_at),
            took = st.last_duration.as_millis(),
            watch = match s.lifecycles.iter().find(|l| l.target == t.name) {
                None => "off in config".to_string(),
                Some(l) if l.connected() => format!(
                    r#"<span class="ok">subscribed, receiving</span>; {}"#,
                    esc(&l.notifications())
                ),
                Some(l) if l.subscribed() => format!(
                    r#"<span class="down">subscribed but not receiving</span>: {}; {}"#,
                    esc(&l.blind().unwrap_or_default()),
                    esc(&l.notifications())
                ),
                Some(l) => format!(
                    r#"<span class="down">not subscribed</span>; {}"#,
                    esc(&l.notifications())
                ),
            },
            trunc = if st.last_truncated {
                " (truncated by sample_budget)"
            } else {
                ""
            },
        );
        for ns in &t.namespaces {
            let census = t.census(ns);
            let cell = |n: i64| {
                if n > 0 {
                    format!(r#"<td class="bad">{n}</td>"#)
                } else {
                    format!("<td>{n}</td>")
                }
            };
            let name = esc(&ns.config.name);
            let _ = writeln!(
                h,
                r#"<tr data-namespace="{name}"><td>{name} <small><code>{pattern}</code></small></td><td>{held}</td>{overdue}{nottl}{long}<td>{age:.1}</td>{unreadable}{takeovers}<td><a href="/api/v1/locks?namespace={name}&amp;target={tname}">locks</a></td></tr>"#,
                pattern = esc(ns.config.pattern.as_str()),
                held = census.held,
                overdue = cell(census.overdue),
                nottl = cell(census.without_ttl),
                long = cell(census.too_long),
                age = census.max_age_ms as f64 / 1000.0,
                unreadable = cell(census.wrong_type + census.bad_value),
                takeovers = match s.lifecycles.iter().find(|l| l.target == t.name) {
                    Some(l) => cell(i64::try_from(l.takeovers(&ns.config.name)).unwrap_or(i64::MAX)),
                    None => "<td>–</td>".to_string(),
                },
                tname = esc(&t.name),
            );
        }
        h.push_str("</table>\n");
    }
    events_section(&mut h, s);
    h.push_str("</body></html>\n");
    h
}

/// Lock failures reported by logs and pushes, per namespace, and what each log source read.
fn events_section(h: &mut String, s: &AppState) {
    let m = &s.intake;
    let count = |ns: &str, op: Op, outcome: Outcome| m.events(ns, op, outcome);
    h.push_str(
        "<h2 id=\"events\">lock failures from logs and pushes</h2>\n<table><tr><th>namespace</th><th>not owned (release, renew)</th><th>renewal failed</th><th>acquire busy / timeout</th><th>stale fence</th></tr>\n",
    );
    let names = s
        .config
        .namespaces
        .iter()
        .map(|n| n.name.as_str())
        .chain([UNKNOWN_NAMESPACE]);
    for ns in names {
        let not_owned = count(ns, Op::Release, Outcome::NotOwned) + count(ns, Op::Renew, Outcome::NotOwned);
        let renew_failed: u64 = Outcome::ALL
            .iter()
            .filter(|o| **o != Outcome::Ok)
            .map(|o| count(ns, Op::Renew, *o))
            .sum();
        let acquire = count(ns, Op::Acquire, Outcome::Busy) + count(ns, Op::Acquire, Outcome::Timeout);
        let stale: u64 = Op::ALL.iter().map(|op| count(ns, *op, Outcome::StaleFence)).sum();
        let cell = |n: u64| {
            if n > 0 {
                format!(r#"<td class="bad">{n}</td>"#)
            } else {
                format!("<td>{n}</td>")
            }
        };
        let _ = writeln!(
            h,
            r#"<tr data-events="{name}"><td>{name}</td>{}{}<td>{acquire}</td>{}</tr>"#,
            cell(not_owned),
            cell(renew_failed),
            cell(stale),
            name = esc(ns),
        );
    }
    h.push_str("</table>\n<table><tr><th>log source</th><th>files</th><th>lock events</th><th>ignored</th><th>malformed</th></tr>\n");
    let sources = s
        .config
        .logs
        .iter()
        .map(|l| (l.name.as_str(), l.path != "-"))
        .chain([(PUSH_SOURCE, false)]);
    for (source, files) in sources {
        let lines = |r: LineResult| m.lines(source, r);
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(source),
            if files {
                m.files(source).to_string()
            } else {
                "–".to_string()
            },
            lines(LineResult::Matched),
            lines(LineResult::Ignored),
            lines(LineResult::Malformed),
        );
    }
    h.push_str("</table>\n");
}
