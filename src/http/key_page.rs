//! `GET /locks/<namespace>?key=K`: one key's page — its lifecycle from the watchers' history
//! drawn as a timeline (holds per owner hash, expiries and takeovers marked), and where it
//! is held now: owner (redacted unless `show_owners`), TTL left, fence; and the lock events
//! from logs and pushes that named it. `&format=json` gives the same as JSON with the page's
//! body, which the page's script polls. Links are relative.

use std::fmt::Write;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::api::{self, EventView, TransitionView};
use super::charts::{self, esc};
use super::{AppState, HttpError, gate, status_page};
use crate::locks::recent::wall_ms;
use crate::locks::view::{self, LockView};
use crate::vocab::EventClass;

/// The longest key the page takes, bytes.
pub(crate) const MAX_KEY: usize = 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KeyQuery {
    key: Option<String>,
    format: Option<String>,
    /// The page script's period, seconds; read by the script only.
    #[serde(rename = "refresh")]
    _refresh: Option<String>,
}

#[derive(Serialize)]
struct KeyStatus {
    namespace: String,
    key: String,
    /// Where the key is held now, one entry per target holding it.
    held: Vec<LockView>,
    transitions: Vec<TransitionView>,
    events: Vec<EventView>,
    /// The page's body as shown.
    html: String,
}

pub(crate) async fn page(
    State(s): State<AppState>,
    Path(ns): Path<String>,
    query: Result<Query<KeyQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, HttpError> {
    let Query(q) = query.map_err(|e| HttpError(StatusCode::BAD_REQUEST, format!("bad query: {}", e.body_text())))?;
    let Some(config) = s.config.namespace(&ns) else {
        let known: Vec<&str> = s.config.namespaces.iter().map(|n| n.name.as_str()).collect();
        return Err(HttpError(
            StatusCode::NOT_FOUND,
            format!("unknown namespace `{ns}`; configured: {}", known.join(", ")),
        ));
    };
    let key = q
        .key
        .filter(|k| !k.is_empty())
        .ok_or_else(|| HttpError(StatusCode::BAD_REQUEST, format!("missing `key`: locks/{ns}?key=K")))?;
    if key.len() > MAX_KEY {
        return Err(HttpError(
            StatusCode::BAD_REQUEST,
            format!("key is {} bytes, over the maximum of {MAX_KEY}", key.len()),
        ));
    }
    if !config.pattern.matches(key.as_bytes()) {
        return Err(HttpError(
            StatusCode::BAD_REQUEST,
            format!(
                "key `{key}` does not match namespace {ns}'s pattern `{}`",
                config.pattern.as_str()
            ),
        ));
    }
    let json = match q.format.as_deref() {
        None | Some("html") => false,
        Some("json") => true,
        Some(other) => {
            return Err(HttpError(
                StatusCode::BAD_REQUEST,
                format!("unknown format `{other}`: html or json"),
            ));
        }
    };
    let Ok(_pass) = s.views.enter().await else {
        return Ok(gate::Busy.into_response());
    };
    let st = tokio::task::spawn_blocking(move || key_status(&s, ns, key))
        .await
        .map_err(|e| HttpError(StatusCode::INTERNAL_SERVER_ERROR, format!("key page failed: {e}")))?;
    if json {
        return Ok(Json(st).into_response());
    }
    let mut h = String::with_capacity(16 * 1024);
    status_page::head(&mut h, &format!("{} · lockwatch", st.key));
    let _ = writeln!(
        h,
        r#"<header><p><a href="../">← lockwatch</a> · namespace {ns}</p><h1>lock <code>{key}</code></h1></header><div id="key-body">{body}</div>{SCRIPT}</body></html>"#,
        ns = esc(&st.namespace),
        key = esc(&st.key),
        body = st.html,
    );
    Ok(Html(h).into_response())
}

fn key_status(s: &AppState, namespace: String, key: String) -> KeyStatus {
    let held = view::one_lock(&s.targets, &namespace, key.as_bytes(), s.config.server.show_owners);
    let transitions = api::transitions(s, key.as_bytes(), |_| true);
    let events = api::events(s, &key);
    let mut html = body(&held, &transitions, !s.lifecycles.is_empty());
    event_table(&mut html, &events, s.config.server.trace_url.as_ref());
    KeyStatus {
        namespace,
        key,
        held,
        transitions,
        events,
        html,
    }
}

/// The lock events that named the key, newest first, each with its trace when it had one.
fn event_table(h: &mut String, events: &[EventView], trace_url: Option<&crate::config::TraceUrl>) {
    h.push_str("<h2>lock events from logs and pushes</h2>");
    if events.is_empty() {
        h.push_str(r#"<p class="quiet">none kept for this key</p>"#);
        return;
    }
    h.push_str(
        r#"<div class="scroll"><table class="events"><tr><th>time</th><th>op</th><th>outcome</th><th>what it says</th><th>source</th><th>trace</th></tr>"#,
    );
    for e in events.iter().rev() {
        let said = match e.class {
            EventClass::Failure => r#"<td class="bad">lock failure</td>"#,
            EventClass::Contention => "<td>contention: waited or gave up</td>",
            EventClass::Ok => "<td>ok</td>",
        };
        let _ = write!(
            h,
            r#"<tr data-op="{op}" data-outcome="{outcome}" data-class="{class}"><td>{at}</td><td>{op}</td><td>{outcome}</td>{said}<td>{source}</td><td>{trace}</td></tr>"#,
            at = esc(&e.at),
            op = e.op,
            outcome = e.outcome,
            class = e.class.as_str(),
            source = esc(&e.source),
            trace = e
                .trace_id
                .as_deref()
                .map(|t| super::trace_link::html(trace_url, t, e.span_id.as_deref()))
                .unwrap_or_default(),
        );
    }
    h.push_str("</table></div>");
}

fn body(held: &[LockView], transitions: &[TransitionView], watched: bool) -> String {
    let mut h = String::from(r#"<h2>now</h2>"#);
    if held.is_empty() {
        h.push_str(r#"<p class="quiet" data-held="0">not held now (as of the last pass or event)</p>"#);
    }
    for l in held {
        let _ = write!(
            h,
            r#"<dl class="facts" data-held="1" data-target="{target}"><dt>target</dt><dd>{target}</dd><dt>owner</dt><dd>{owner} <small>hash <code data-owner-hash>{hash}</code></small></dd><dt>TTL left</dt><dd data-ttl-ms="{pttl}">{ttl}</dd><dt>held for</dt><dd>{age:.1} s</dd><dt>fence</dt><dd data-fence>{fence}</dd><dt>renewal</dt><dd>{overdue}</dd></dl>"#,
            target = esc(&l.target),
            owner = esc(&l.owner),
            hash = esc(&l.owner_hash),
            pttl = l.pttl_ms,
            ttl = if l.pttl_ms < 0 {
                r#"<span class="bad">none (no expiry)</span>"#.to_string()
            } else {
                format!("{:.1} s", l.pttl_ms as f64 / 1000.0)
            },
            age = l.age_s,
            fence = l.fence.map_or("–".to_string(), |f| f.to_string()),
            overdue = if l.overdue {
                r#"<span class="bad">overdue</span>"#
            } else {
                "on time"
            },
        );
    }
    h.push_str("<h2>lifecycle</h2>");
    if !watched {
        h.push_str(r#"<p class="quiet">notifications are off for every target: no lifecycle is recorded</p>"#);
        return h;
    }
    if transitions.is_empty() {
        h.push_str(r#"<p class="quiet">no transition recorded for this key</p>"#);
        return h;
    }
    let now = wall_ms();
    let drawn: Vec<charts::Transition<'_>> = transitions
        .iter()
        .map(|t| (t.at_ms, t.kind, t.owner_hash.as_deref(), t.takeover))
        .collect();
    h.push_str(r#"<div class="scroll">"#);
    h.push_str(&charts::lifecycle(&drawn, now));
    h.push_str("</div>");
    h.push_str(r#"<div class="scroll"><table class="transitions"><tr><th>time</th><th>target</th><th>transition</th><th>owner hash</th><th></th></tr>"#);
    for t in transitions.iter().rev() {
        let _ = write!(
            h,
            r#"<tr data-kind="{kind}"{tk}><td>{at}</td><td>{target}</td><td>{kind}</td><td><code>{owner}</code></td><td>{mark}</td></tr>"#,
            at = esc(&t.at),
            target = esc(&t.target),
            kind = t.kind,
            owner = t.owner_hash.as_deref().unwrap_or("–"),
            tk = if t.takeover { r#" data-takeover="1""# } else { "" },
            mark = if t.takeover {
                r#"<span class="bad">takeover</span>"#
            } else {
                ""
            },
        );
    }
    h.push_str("</table></div>");
    h
}

/// Polls this page's JSON every 5 s (`&refresh=N`: every N s) and replaces the body.
const SCRIPT: &str = r#"<script>
(function(){
  var url=location.pathname.split('/').pop()+location.search+'&format=json';
  var every=Math.max(1,Number(new URLSearchParams(location.search).get('refresh'))||5)*1000;
  function poll(){
    fetch(url,{cache:'no-store'}).then(function(r){ if(!r.ok) throw new Error(r.status); return r.json(); })
      .then(function(st){ var b=document.getElementById('key-body'); b.innerHTML=st.html;
        b.dataset.updates=String(1+Number(b.dataset.updates||0)); })
      .catch(function(){}).then(function(){ setTimeout(poll,every); });
  }
  setTimeout(poll,every);
})();
</script>"#;
