//! `GET /`: a small HTML status page for when Grafana is not at hand. First the workers a
//! drill holds frozen (`freeze_view`), then the state of each target and namespace, one
//! line each, worst first, the drills' latest results (`drill_view`), and the incidents grouped by kind and namespace (keys a click
//! away, `summary`); then per target its health, the counts of the last pass and the charts
//! of the last hour; the lock events reported by logs and pushes — failures, and contention
//! apart —, and what each log source read.
//!
//! Self-contained (no external requests) and relative links only, so it works offline and
//! behind a proxy path prefix. Rendered on the server; the inline script only polls
//! `api/v1/status` to update it in place (`status_view`).

use std::fmt::Write;
use std::time::SystemTime;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

use super::charts::esc;
use super::status_view;
use super::{AppState, HttpError, gate};

use crate::duration;
use crate::vocab::{EventClass, Op, Outcome};
use crate::vocab::{LineResult, PUSH_SOURCES, UNKNOWN_NAMESPACE};

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

/// The head of a page: title, viewport, style; without JavaScript, a refresh every 10 s.
pub(super) fn head(h: &mut String, title: &str) {
    let _ = write!(
        h,
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><link rel="icon" href="data:,"><noscript><meta http-equiv="refresh" content="10"></noscript>
<title>{}</title><style>{}</style></head><body class="status">
"#,
        esc(title),
        crate::document::html::STYLE
    );
}

fn render(s: &AppState) -> String {
    let status = status_view::status(s);
    let mut h = String::with_capacity(32 * 1024);
    head(&mut h, "lockwatch");
    let _ = write!(
        h,
        r#"<header><h1>lockwatch</h1>
<p>version {} · <a href="metrics">metrics</a> · <a href="api/v1/locks">api/v1/locks</a> · <a href="api/v1/status">api/v1/status</a> · <a href="readyz">readyz</a> · <a href="healthz">healthz</a> · <span id="live">as of <time id="generated">{}</time></span></p></header>
"#,
        env!("CARGO_PKG_VERSION"),
        status_view::rfc3339(status.generated_ms),
    );
    // What matters first: the state of each target and namespace, worst first; then the
    // incidents, grouped, so repeats add to a count and never push the summary down.
    // A worker a drill holds stopped comes before everything: it may need a hand now.
    h.push_str(r#"<section id="lead"><div id="drills">"#);
    h.push_str(&status.drill_freezes_html);
    h.push_str(r#"</div><h2 id="state">state</h2><div id="summary">"#);
    h.push_str(&status.summary_html);
    h.push_str(r#"</div><div id="drill-results">"#);
    h.push_str(&status.drills_html);
    h.push_str(r#"</div><h2 id="timeline">incidents <small>grouped by kind and namespace, latest first</small></h2><div id="incidents">"#);
    h.push_str(&status.timeline_html);
    h.push_str("</div></section>\n");
    for (t, tv) in s.targets.iter().zip(&status.targets) {
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
            r#"<section data-target="{name}"><h2 id="target-{name}">target {name}</h2><p><code>{url}</code> — {health}; last pass {ago}, took {took} ms{trunc}</p>
<p>keyspace notifications: {watch}</p>
<p>tracking: {mode}</p>
<div class="scroll"><table><tr><th>namespace</th><th>held</th><th>renewal overdue</th><th>without TTL</th><th>held too long</th><th>longest hold (s)</th><th>unreadable keys</th><th>expiry takeovers</th><th></th></tr>
"#,
            name = esc(&t.name),
            url = esc(&t.display_url),
            mode = status_view::tracking(t),
            ago = ago(st.last_pass_at),
            took = st.last_duration.as_millis(),
            watch = status_view::notifications(s, t).1,
            trunc = if st.last_truncated {
                " (truncated by sample_budget)"
            } else {
                ""
            },
        );
        for (ns, nv) in t.namespaces.iter().zip(&tv.namespaces) {
            let cell = |n: i64| {
                if n > 0 {
                    format!(r#"<td class="bad">{n}</td>"#)
                } else {
                    format!("<td>{n}</td>")
                }
            };
            let name = esc(&nv.name);
            let _ = writeln!(
                h,
                r#"<tr data-namespace="{name}"><td>{name} <small><code>{pattern}</code></small></td><td>{held}</td>{overdue}{nottl}{long}<td>{age:.1}</td>{unreadable}{takeovers}<td><a href="api/v1/locks?namespace={name}&amp;target={tname}">locks</a></td></tr>"#,
                pattern = esc(ns.config.pattern.as_str()),
                held = nv.held,
                overdue = cell(nv.overdue),
                nottl = cell(nv.without_ttl),
                long = cell(nv.too_long),
                age = nv.longest_hold_s,
                unreadable = cell(nv.unreadable),
                takeovers = match nv.takeovers {
                    Some(n) => cell(i64::try_from(n).unwrap_or(i64::MAX)),
                    None => "<td>–</td>".to_string(),
                },
                tname = esc(&t.name),
            );
        }
        h.push_str("</table></div>\n");
        charts(&mut h, tv);
        h.push_str("</section>\n");
    }
    events_section(&mut h, s);
    h.push_str(SCRIPT);
    h.push_str("</body></html>\n");
    h
}

/// A target's namespaces, each with its four charts of the last hour.
fn charts(h: &mut String, tv: &status_view::TargetView) {
    h.push_str(r#"<div class="grid">"#);
    for nv in &tv.namespaces {
        let _ = write!(
            h,
            r#"<div class="ns" data-charts="{name}"><h3>{name} <small>the last hour: gauges every 10 s, counts per minute</small></h3><div class="charts">{}</div></div>"#,
            nv.charts_html,
            name = esc(&nv.name),
        );
    }
    h.push_str("</div>\n");
}

/// Polls `api/v1/status` (relative: works under a path prefix) every 5 s (`?refresh=N`:
/// every N s, at least 1) and updates the
/// numbers, the charts and the timeline in place; the page stands complete without it.
const SCRIPT: &str = r#"<script>
(function(){
  var esc=function(s){return String(s).split('"').join('\\"');};
  function cell(td,v){ if(!td||v===null||v===undefined) return; td.textContent=String(v);
    if(td.dataset.plain===undefined){ td.className=(typeof v==='number'&&v>0)?'bad':''; } }
  function apply(st){
    st.targets.forEach(function(t){
      var sec=document.querySelector('section[data-target="'+esc(t.name)+'"]'); if(!sec) return;
      t.namespaces.forEach(function(n){
        var row=sec.querySelector('tr[data-namespace="'+esc(n.name)+'"]');
        if(row){ var c=row.children; c[1].dataset.plain=''; cell(c[1],n.held); cell(c[2],n.overdue); cell(c[3],n.without_ttl);
          cell(c[4],n.too_long); c[5].dataset.plain=''; cell(c[5],n.longest_hold_s.toFixed(1)); cell(c[6],n.unreadable);
          if(n.takeovers!==null) cell(c[7],n.takeovers); }
        var ch=sec.querySelector('div[data-charts="'+esc(n.name)+'"] .charts'); if(ch) ch.innerHTML=n.charts_html;
      });
    });
    document.getElementById('incidents').innerHTML=st.timeline_html;
    document.getElementById('summary').innerHTML=st.summary_html;
    document.getElementById('drills').innerHTML=st.drill_freezes_html;
    document.getElementById('drill-results').innerHTML=st.drills_html;
    var g=document.getElementById('generated'); g.textContent=new Date(st.generated_ms).toISOString().slice(0,19)+'Z';
    document.getElementById('live').dataset.updates=String(1+Number(document.getElementById('live').dataset.updates||0));
  }
  function poll(){
    fetch('api/v1/status',{cache:'no-store'}).then(function(r){ if(!r.ok) throw new Error(r.status); return r.json(); })
      .then(function(st){ apply(st); document.getElementById('live').firstChild.textContent='live · '; })
      .catch(function(){ document.getElementById('live').firstChild.textContent='not updating (retrying) · as of '; })
      .then(function(){ setTimeout(poll,REFRESH_MS); });
  }
  var REFRESH_MS=Math.max(1,Number(new URLSearchParams(location.search).get('refresh'))||5)*1000;
  setTimeout(poll,REFRESH_MS);
})();
</script>
"#;

/// Lock events reported by logs and pushes, per namespace — the failures, and the contention
/// apart (`EventClass`) — and what each log source read.
fn events_section(h: &mut String, s: &AppState) {
    let m = &s.intake;
    let count = |ns: &str, op: Op, outcome: Outcome| m.events(ns, op, outcome);
    h.push_str(
        "<h2 id=\"events\">lock events from logs and pushes <small>failures: not owned, stale fence, errors, failed renewals; contention: acquisitions that found the lock held or gave up waiting, the lock working</small></h2>\n<div class=\"scroll\"><table><tr><th>namespace</th><th>failures</th><th>not owned (release, renew)</th><th>renewal failed</th><th>stale fence</th><th>acquisitions waited or gave up (contention)</th></tr>\n",
    );
    let names = s
        .config
        .namespaces
        .iter()
        .map(|n| n.name.as_str())
        .chain([UNKNOWN_NAMESPACE]);
    for ns in names {
        let of_class = |class: EventClass| -> u64 {
            Op::ALL
                .iter()
                .flat_map(|op| Outcome::ALL.map(|o| (*op, o)))
                .filter(|(op, o)| EventClass::of(*op, *o) == class)
                .map(|(op, o)| count(ns, op, o))
                .sum()
        };
        let not_owned = count(ns, Op::Release, Outcome::NotOwned) + count(ns, Op::Renew, Outcome::NotOwned);
        let renew_failed: u64 = Outcome::ALL
            .iter()
            .filter(|o| EventClass::of(Op::Renew, **o) == EventClass::Failure)
            .map(|o| count(ns, Op::Renew, *o))
            .sum();
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
            r#"<tr data-events="{name}"><td>{name}</td>{}{}{}{}<td data-contention>{}</td></tr>"#,
            cell(of_class(EventClass::Failure)),
            cell(not_owned),
            cell(renew_failed),
            cell(stale),
            of_class(EventClass::Contention),
            name = esc(ns),
        );
    }
    h.push_str("</table></div>\n<div class=\"scroll\"><table><tr><th>log source</th><th>files</th><th>lock events</th><th>ignored</th><th>malformed</th></tr>\n");
    let sources = s
        .config
        .logs
        .iter()
        .map(|l| (l.name.as_str(), l.path != "-"))
        .chain(PUSH_SOURCES.map(|s| (s, false)));
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
    h.push_str("</table></div>\n");
}
