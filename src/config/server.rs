//! The `[server]` table: the listen address (with the exporters' `:port` shorthand and the
//! `--listen` override), the push token, the web config file (`web`), the limits every
//! HTTP connection is held to (`HttpLimits`) and the trace link template (`TraceUrl`).
//! Serving HTTP is `serve`'s and `http`'s job.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use super::raw::RawServer;
use super::secret::read_secret;
use super::web::{self, WebConfig};
use super::{ConfigError, Cx, Overrides, Secret};
use crate::metrics::TraceContext;

/// Default listen address; 9747 is lockwatch's port.
pub(crate) const DEFAULT_LISTEN: &str = "0.0.0.0:9747";

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// Bearer token for `POST /api/v1/events`, read from `push_token_file`.
    pub push_token: Option<Secret>,
    /// Show owner tokens in `/api/v1/locks`; they are capabilities, so off by default.
    pub show_owners: bool,
    /// TLS, basic auth and headers from `web_config_file` / `--web.config.file`.
    pub web: Option<WebConfig>,
    pub limits: HttpLimits,
    /// Where a trace id links to, on the status page and the key page.
    pub trace_url: Option<TraceUrl>,
    /// The most drills whose results are kept (`POST /api/v1/drills`); a record of one
    /// more is refused.
    pub max_drills: usize,
}

/// `max_drills` unless set.
pub const MAX_DRILLS: usize = 100;
/// `max_drills` may not go past this: each drill is a handful of series and up to a
/// report's body in memory.
pub const MAX_DRILLS_LIMIT: usize = 10_000;

/// `[server] trace_url`: an `http(s)` URL template with `{trace_id}` (and optionally
/// `{span_id}`), e.g. Grafana Explore on Tempo, Jaeger's `/trace/{trace_id}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceUrl(String);

impl TraceUrl {
    /// The template checked: `http://` or `https://`, `{trace_id}` in it, no other `{…}`.
    pub fn parse(template: &str) -> Result<Self, String> {
        let lower = template.to_ascii_lowercase();
        if !(lower.starts_with("http://") || lower.starts_with("https://")) {
            return Err(format!("`{template}` must start with http:// or https://"));
        }
        if !template.contains("{trace_id}") {
            return Err(format!(
                "`{template}` has no {{trace_id}}: write where the trace id goes, e.g. \"https://jaeger.example/trace/{{trace_id}}\""
            ));
        }
        let rest = template.replace("{trace_id}", "").replace("{span_id}", "");
        if rest.contains(['{', '}']) || template.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "`{template}` may hold {{trace_id}} and {{span_id}} only, and no spaces"
            ));
        }
        Ok(TraceUrl(template.to_string()))
    }

    /// The link to `trace` (ids are letters, digits, `-` and `_`: nothing to escape; a
    /// missing span id is left empty).
    pub fn link(&self, trace: &TraceContext) -> String {
        self.0
            .replace("{trace_id}", &trace.trace_id)
            .replace("{span_id}", trace.span_id.as_deref().unwrap_or(""))
    }
}

/// What one HTTP client may hold of the exporter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Connections open at once (TLS handshakes included); past it, the connection idle
    /// the longest is closed for the newcomer.
    pub max_connections: usize,
    /// From accepting a connection (TLS handshake included), or from the first byte of a
    /// next request, until the request's head is complete.
    pub header_timeout: Duration,
    /// From a request's head until its body has arrived whole (the push).
    pub body_timeout: Duration,
    /// A kept-alive connection with no request in progress.
    pub idle_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: 256,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(90),
        }
    }
}

/// `max_connections` may not go below this: requests in progress (pushes, listings, basic
/// auth checks) are bounded by fewer, so an idle connection is always there to give way.
pub const MIN_CONNECTIONS: usize = 64;
/// Nor above this.
pub const MAX_CONNECTIONS: usize = 65_536;

impl Cx<'_> {
    pub(super) fn server(&self, raw: RawServer, base: &Path, ov: &Overrides) -> Result<ServerConfig, ConfigError> {
        let (listen_text, span, key) = match (&ov.listen, &raw.listen) {
            (Some(l), _) => (l.clone(), None, "--listen"),
            (None, Some(l)) => (l.get_ref().clone(), Some(l.span()), "server.listen"),
            (None, None) => (DEFAULT_LISTEN.to_string(), None, "server.listen"),
        };
        let listen = parse_listen(&listen_text).ok_or_else(|| {
            self.err(
                span.as_ref(),
                key,
                format!("`{listen_text}` is not an address: write host:port, e.g. \"0.0.0.0:9747\" or \":9747\""),
            )
        })?;
        let limits = self.limits(&raw)?;
        let push_token = match raw.push_token_file {
            Some(f) => {
                let token = read_secret(&base.join(f.get_ref()))
                    .map_err(|e| self.err(Some(&f.span()), "server.push_token_file", e))?;
                Some(token)
            }
            None => None,
        };
        // The flag's path is the operator's (relative to the working directory); the file's
        // is relative to the config file, like every path in it.
        let web = match (&ov.web_config_file, &raw.web_config_file) {
            (Some(path), _) => Some(web::load(path)?),
            (None, Some(f)) if f.get_ref().is_empty() => None,
            (None, Some(f)) => Some(web::load(&base.join(f.get_ref()))?),
            (None, None) => None,
        };
        let trace_url = match &raw.trace_url {
            Some(t) if t.get_ref().is_empty() => None,
            Some(t) => {
                Some(TraceUrl::parse(t.get_ref()).map_err(|e| self.err(Some(&t.span()), "server.trace_url", e))?)
            }
            None => None,
        };
        let max_drills = match &raw.max_drills {
            None => MAX_DRILLS,
            Some(v) => usize::try_from(*v.get_ref())
                .ok()
                .filter(|n| (1..=MAX_DRILLS_LIMIT).contains(n))
                .ok_or_else(|| {
                    self.err(
                        Some(&v.span()),
                        "server.max_drills",
                        format!("{} is out of range 1..={MAX_DRILLS_LIMIT}", v.get_ref()),
                    )
                })?,
        };
        Ok(ServerConfig {
            listen,
            push_token,
            show_owners: raw.show_owners.unwrap_or(false),
            web,
            limits,
            trace_url,
            max_drills,
        })
    }

    fn limits(&self, raw: &RawServer) -> Result<HttpLimits, ConfigError> {
        let d = HttpLimits::default();
        let duration = |v: &Option<_>, key: &str, default: Duration| match v {
            Some(v) => self.duration(v, key),
            None => Ok(default),
        };
        let max_connections = match &raw.max_connections {
            None => d.max_connections,
            Some(v) => usize::try_from(*v.get_ref())
                .ok()
                .filter(|n| (MIN_CONNECTIONS..=MAX_CONNECTIONS).contains(n))
                .ok_or_else(|| {
                    self.err(
                        Some(&v.span()),
                        "server.max_connections",
                        format!("{} is out of range {MIN_CONNECTIONS}..={MAX_CONNECTIONS}", v.get_ref()),
                    )
                })?,
        };
        Ok(HttpLimits {
            max_connections,
            header_timeout: duration(&raw.header_timeout, "server.header_timeout", d.header_timeout)?,
            body_timeout: duration(&raw.body_timeout, "server.body_timeout", d.body_timeout)?,
            idle_timeout: duration(&raw.idle_timeout, "server.idle_timeout", d.idle_timeout)?,
        })
    }
}

/// `host:port`, or `:port` for every interface (the Prometheus exporters' convention).
pub(super) fn parse_listen(s: &str) -> Option<SocketAddr> {
    if let Some(port) = s.strip_prefix(':') {
        return format!("0.0.0.0:{port}").parse().ok();
    }
    if let Some(port) = s.strip_prefix("localhost:") {
        return format!("127.0.0.1:{port}").parse().ok();
    }
    s.parse().ok()
}
