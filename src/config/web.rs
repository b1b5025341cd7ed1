//! The exporter's web security: the Prometheus exporter-toolkit web config file (YAML) named
//! by `[server] web_config_file` or `--web.config.file` — TLS (`tls_server_config`), basic
//! auth (`basic_auth_users`, bcrypt hashes) and extra response headers. Everything is read
//! and checked at load; the TLS settings become a rustls server config (`web_tls`). Applying
//! them to requests is `http`'s job.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use serde::Deserialize;

use super::web_tls::{self, ClientAuth, TlsFiles};
use super::{ConfigError, Secret};

/// The web config as lockwatch applies it.
#[derive(Debug, Clone)]
pub struct WebConfig {
    /// The file it was read from, for messages.
    pub path: PathBuf,
    /// HTTPS instead of HTTP, when `tls_server_config` is set.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// `client_auth_type`, for the start-up log line.
    pub client_auth: ClientAuth,
    /// User name → bcrypt hash; empty means no basic auth.
    pub users: BTreeMap<String, Secret>,
    /// `http_server_config.headers`: set on every response.
    pub headers: Vec<(String, String)>,
}

/// The file as written; unknown keys are refused, as the toolkit's strict YAML does.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWeb {
    tls_server_config: Option<RawTls>,
    http_server_config: Option<RawHttp>,
    basic_auth_users: Option<BTreeMap<String, String>>,
    rate_limit: Option<serde_yaml_ng::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTls {
    pub cert: Option<String>,
    pub key: Option<String>,
    pub client_ca: Option<String>,
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
    pub client_ca_file: Option<String>,
    pub client_auth_type: Option<String>,
    pub client_allowed_sans: Option<Vec<String>>,
    pub min_version: Option<String>,
    pub max_version: Option<String>,
    pub cipher_suites: Option<Vec<String>>,
    pub curve_preferences: Option<Vec<String>>,
    pub prefer_server_cipher_suites: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    /// Accepted for compatibility; lockwatch answers HTTP/1.1 either way.
    #[allow(dead_code)]
    http2: Option<bool>,
    headers: Option<BTreeMap<String, String>>,
}

/// The headers a web config may set, with their allowed values (none listed: any value),
/// as the exporter-toolkit allows them.
const HEADERS: [(&str, &[&str]); 5] = [
    ("Strict-Transport-Security", &[]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-XSS-Protection", &[]),
    ("Content-Security-Policy", &[]),
];

/// An error about one key of the web config file.
pub(super) struct WebError {
    pub key: String,
    pub message: String,
}

impl WebError {
    pub(super) fn new(key: impl Into<String>, message: impl Into<String>) -> WebError {
        WebError {
            key: key.into(),
            message: message.into(),
        }
    }
}

/// Read and check the web config at `path`; paths inside it are relative to its directory.
pub(super) fn load(path: &Path) -> Result<WebConfig, ConfigError> {
    let file = path.display().to_string();
    let invalid = |line: Option<usize>, e: WebError| ConfigError::Invalid {
        file: file.clone(),
        line,
        key: e.key,
        message: e.message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| {
        invalid(
            None,
            WebError::new("web_config_file", format!("cannot read {file}: {e}")),
        )
    })?;
    let raw = parse(&text).map_err(|(line, e)| invalid(line, e))?;
    let base = path.parent().unwrap_or(Path::new("."));
    build(raw, base, path).map_err(|e| invalid(None, e))
}

/// The YAML shapes; an empty file (or one of comments only) means no TLS and no auth.
fn parse(text: &str) -> Result<RawWeb, (Option<usize>, WebError)> {
    let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).map_err(|e| yaml_error(&e))?;
    if value.is_null() {
        return Ok(RawWeb::default());
    }
    // Parsed again from the text, so that a shape error carries its line.
    serde_yaml_ng::from_str(text).map_err(|e| yaml_error(&e))
}

/// A YAML error as the key it names (serde's `a.b: unknown field…` prefix) and its line.
fn yaml_error(e: &serde_yaml_ng::Error) -> (Option<usize>, WebError) {
    let text = e.to_string();
    // The location is repeated at the end of the message; the line is reported on its own.
    let text = text.split(" at line ").next().unwrap_or(&text).to_string();
    let shape = ["unknown field", "missing field", "invalid type", "invalid value"];
    let (key, message) = match text.split_once(": ") {
        Some((path, rest)) if !path.contains(' ') => (path.to_string(), rest.to_string()),
        _ if shape.iter().any(|s| text.starts_with(s)) => ("schema".to_string(), text.clone()),
        _ => ("syntax".to_string(), text.clone()),
    };
    (e.location().map(|l| l.line()), WebError::new(key, message))
}

fn build(raw: RawWeb, base: &Path, path: &Path) -> Result<WebConfig, WebError> {
    if raw.rate_limit.is_some() {
        return Err(WebError::new(
            "rate_limit",
            "not supported by lockwatch: remove it (scrapes read published metrics and cost Redis nothing)",
        ));
    }
    let (tls, client_auth) = match raw.tls_server_config {
        Some(t) if web_tls::enabled(&t) => {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let (files, auth) = TlsFiles::read(&t, base, &provider)?;
            (Some(web_tls::server_config(&t, files, auth, provider)?), auth)
        }
        _ => (None, ClientAuth::NoClientCert),
    };
    let users = users(raw.basic_auth_users.unwrap_or_default())?;
    let headers = headers(raw.http_server_config.and_then(|h| h.headers).unwrap_or_default())?;
    Ok(WebConfig {
        path: path.to_path_buf(),
        tls,
        client_auth,
        users,
        headers,
    })
}

/// Each user's hash must be a bcrypt hash (`$2a$`, `$2b$`, `$2y$`…); a name with `:` could
/// never be sent in basic auth.
fn users(raw: BTreeMap<String, String>) -> Result<BTreeMap<String, Secret>, WebError> {
    let mut out = BTreeMap::new();
    for (user, hash) in raw {
        let key = format!("basic_auth_users.{user}");
        if user.is_empty() || user.contains(':') {
            return Err(WebError::new(
                key,
                "a user name must be non-empty and without `:` (basic auth separates name and password with it)",
            ));
        }
        if bcrypt::HashParts::from_str(&hash).is_err() {
            return Err(WebError::new(
                key,
                "is not a bcrypt hash: make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'` (it starts with $2y$10$)",
            ));
        }
        out.insert(user, Secret::new(hash));
    }
    Ok(out)
}

/// Only the toolkit's headers, with its enumerated values.
fn headers(raw: BTreeMap<String, String>) -> Result<Vec<(String, String)>, WebError> {
    let mut out = Vec::new();
    for (name, value) in raw {
        let key = format!("http_server_config.headers.{name}");
        let Some((_, allowed)) = HEADERS.iter().find(|(h, _)| *h == name) else {
            let names: Vec<&str> = HEADERS.iter().map(|(h, _)| *h).collect();
            return Err(WebError::new(
                key,
                format!("this header cannot be configured: use one of {}", names.join(", ")),
            ));
        };
        if !allowed.is_empty() && !allowed.contains(&value.as_str()) {
            return Err(WebError::new(
                key,
                format!("`{value}` is not allowed: write {}", allowed.join(" or ")),
            ));
        }
        if !value.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b)) {
            return Err(WebError::new(key, "a header value must be printable ASCII"));
        }
        if !value.is_empty() {
            out.push((name, value));
        }
    }
    Ok(out)
}
