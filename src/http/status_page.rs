//! `GET /`: a small HTML status page for when Grafana is not at hand. First the workers a
//! drill holds frozen (`freeze_view`), then the state of each target and namespace, one
//! line each, worst first, and the incidents grouped by kind and namespace (keys a click
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

/// Colours and layout: light and dark after the browser, one column on a phone.
pub(super) const STYLE: &str = r#"
:root{color-scheme:light dark;--fg:#1d2125;--mute:#5f6b76;--bg:#fff;--card:#f6f8fa;--line:#d0d7de;--bad:#c62828;--badbg:#fde8e8;--ok:#1b7a33;--accent:#1f6feb;--warn:#b45309}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--mute:#9aa7b3;--bg:#0d1117;--card:#161b22;--line:#30363d;--bad:#ff7b72;--badbg:#3d1618;--ok:#56d364;--accent:#58a6ff;--warn:#e3b341}}
*{box-sizing:border-box} body{font-family:system-ui,sans-serif;margin:0 auto;padding:1em 1.2em;max-width:1280px;color:var(--fg);background:var(--bg);line-height:1.4}
a{color:var(--accent)} h1{margin:.2em 0} h2{margin:1.2em 0 .4em;font-size:1.25em} small,.quiet{color:var(--mute)}
.scroll{overflow-x:auto} table{border-collapse:collapse;margin:.6em 0}
th,td{border:1px solid var(--line);padding:.3em .6em;text-align:right} th:first-child,td:first-child{text-align:left}
.bad{background:var(--badbg);color:var(--bad);font-weight:bold} .ok{color:var(--ok)} .down{color:var(--bad);font-weight:bold} code{background:var(--card);padding:0 .2em;word-break:break-all}
.grid{display:grid;gap:.8em} .charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(200px,1fr));gap:0 1.2em}
.ns{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:.5em .7em} .ns h3{margin:0 0 .3em;font-size:1em}
.chart{margin:.5em 0;display:flex;flex-direction:column} .chart figcaption{display:flex;flex-wrap:wrap;align-items:baseline;align-content:flex-end;flex:1 0 auto;gap:0 .4em;font-size:.85em;color:var(--mute)} .chart b{color:var(--fg);font-size:1.3em;font-variant-numeric:tabular-nums}
.chart .plot{display:grid;grid-template-columns:2.4em 1fr;gap:.3em} .chart .y{display:flex;flex-direction:column;justify-content:space-between;font-size:.72em;color:var(--mute);text-align:right;font-variant-numeric:tabular-nums;line-height:1}
.chart svg{width:100%;height:64px;display:block;border-left:1px solid var(--mute);border-bottom:1px solid var(--mute)} .chart .mid{stroke:var(--line);stroke-dasharray:3 3;vector-effect:non-scaling-stroke}
.chart .x{display:flex;justify-content:space-between;font-size:.72em;color:var(--mute);margin-left:2.7em}
.chart.line path{fill:none;stroke:var(--accent);stroke-width:2;vector-effect:non-scaling-stroke} .chart.line path.area{fill:var(--accent);opacity:.15;stroke:none}
.chart.bars rect{fill:var(--bad)} .chart[data-metric=contention] rect{fill:var(--mute)} .chart.line rect.last{fill:var(--accent)} .chart[data-metric=overdue] rect.last{fill:var(--warn)} .chart[data-metric=overdue] path{stroke:var(--warn)} .chart[data-metric=overdue] path.area{fill:var(--warn)}
.chart figcaption small{flex-basis:100%;text-align:right}
ol.summary{list-style:none;padding:0;margin:.3em 0} .summary .line{padding:.25em .5em;margin:.15em 0;border-left:5px solid var(--ok);background:var(--card);overflow-wrap:anywhere}
.summary .lvl-bad{border-color:var(--bad);background:var(--badbg)} .summary .lvl-bad .mark,.summary .lvl-bad .what{color:var(--bad)} .summary .lvl-warn{border-color:var(--warn)} .summary .lvl-warn .mark{color:var(--warn)} .summary .lvl-ok .mark{color:var(--ok)}
details{display:inline-block;margin-left:.5em} details[open]{display:block;margin:.2em 0 0 .5em} summary{cursor:pointer;color:var(--accent)} .keys a,.keys code{margin-right:.6em;font-size:.9em}
ol.timeline{list-style:none;padding:0;margin:.4em 0} .incident{padding:.3em .5em;border-left:4px solid var(--line);margin:.2em 0;background:var(--card);overflow-wrap:anywhere}
.incident time{font-variant-numeric:tabular-nums;color:var(--mute)} .incident .what{font-weight:bold}
.incident.takeover,.incident.lost_in_failover{border-color:var(--bad)} .incident.overdue,.incident.without_ttl,.incident.failure_burst{border-color:var(--warn)}
#live{font-size:.85em;color:var(--mute)}
svg.lifecycle{width:100%;min-width:600px;height:auto;background:var(--card);border:1px solid var(--line)} .lifecycle .lane{fill:var(--mute);font-size:12px;font-family:monospace}
.lifecycle .hold{fill:var(--accent);opacity:.75} .lifecycle .expiry{fill:var(--bad);font-size:18px} .lifecycle .takeover{fill:var(--bad);font-size:14px}
table.transitions code{white-space:nowrap;word-break:normal} dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em} dl.facts dt{color:var(--mute)} dl.facts dd{margin:0}
@media (max-width:600px){body{padding:.6em} th,td{padding:.2em .35em;font-size:.9em}}
"#;

/// The head of a page: title, viewport, style; without JavaScript, a refresh every 10 s.
pub(super) fn head(h: &mut String, title: &str) {
    let _ = write!(
        h,
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><link rel="icon" href="data:,"><noscript><meta http-equiv="refresh" content="10"></noscript>
<title>{}</title><style>{STYLE}</style></head><body>
"#,
        esc(title)
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
