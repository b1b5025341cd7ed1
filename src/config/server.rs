//! The `[server]` table: the listen address (with the exporters' `:port` shorthand and the
//! `--listen` override), the push token and the web config file (`web`). Serving HTTP is
//! `serve`'s and `http`'s job.

use std::net::SocketAddr;
use std::path::Path;

use super::raw::RawServer;
use super::secret::read_secret;
use super::web::{self, WebConfig};
use super::{ConfigError, Cx, Overrides, Secret};

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
}

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
        Ok(ServerConfig {
            listen,
            push_token,
            show_owners: raw.show_owners.unwrap_or(false),
            web,
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
