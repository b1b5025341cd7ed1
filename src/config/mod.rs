//! The validated configuration: one object, built once from the TOML file plus command-line
//! and environment overrides, that every working part reads.
//!
//! `Config::load` returns either a config whose every value has been checked (durations,
//! globs, names, thresholds, secrets readable) or one `ConfigError` naming the key and line.
//! It does not touch Redis; `check-config --connect` does that.

mod alerts;
mod raw;

pub use alerts::{AlertsConfig, Thresholds};

use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use redis::IntoConnectionInfo;

use crate::duration;
use crate::glob::Glob;
use crate::vocab::{Op, Outcome, PUSH_SOURCE, UNKNOWN_NAMESPACE};
use raw::{RawConfig, RawNamespace, RawTarget, S};

/// Default listen address; 9747 is lockwatch's port.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9747";

/// A config that could not be loaded. Displayed to the operator as one sentence.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{file}{}: {key}: {message}", line.map(|l| format!(" line {l}")).unwrap_or_default())]
    Invalid {
        file: String,
        line: Option<usize>,
        key: String,
        message: String,
    },
}

/// A secret read from a file or the environment. Never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Settings given on the command line or in `LOCKWATCH_*` variables; they win over the file.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub listen: Option<String>,
    /// Replaces the `url` of the only target (an error when the file has several).
    pub redis_url: Option<String>,
    /// For every target that has no `password_file` of its own.
    pub redis_password: Option<Secret>,
    pub redis_password_file: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct Config {
    /// Where the config came from, for messages.
    pub source: String,
    pub server: ServerConfig,
    pub targets: Vec<TargetConfig>,
    pub namespaces: Vec<NamespaceConfig>,
    pub logs: Vec<LogConfig>,
    pub rules: Vec<RuleConfig>,
    pub state_dir: Option<PathBuf>,
    pub alerts: AlertsConfig,
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// Bearer token for `POST /api/v1/events`, read from `push_token_file`.
    pub push_token: Option<Secret>,
    /// Show owner tokens in `/api/v1/locks`; they are capabilities, so off by default.
    pub show_owners: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notifications {
    Auto,
    Require,
    Off,
    Configure,
}

impl Notifications {
    pub fn as_str(self) -> &'static str {
        match self {
            Notifications::Auto => "auto",
            Notifications::Require => "require",
            Notifications::Off => "off",
            Notifications::Configure => "configure",
        }
    }
}

#[derive(Debug, Clone)]
pub struct TargetConfig {
    pub name: String,
    pub environment: Option<String>,
    /// The URL as configured with any password removed: safe to log.
    pub display_url: String,
    /// Everything needed to connect, password included.
    pub connection: redis::ConnectionInfo,
    pub sample_interval: Duration,
    pub scan_count: usize,
    pub sample_budget: Duration,
    pub notifications: Notifications,
}

/// How the owner is read from a lock key's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueKind {
    /// The whole string value is the owner token.
    Token,
    /// The value is JSON; this dotted path holds the owner.
    Json(Vec<String>),
    /// A Redisson lock: a hash whose one field `<uuid>:<threadId>` is the owner.
    Redisson,
}

#[derive(Debug, Clone)]
pub struct NamespaceConfig {
    pub name: String,
    pub pattern: Glob,
    pub ttl: Duration,
    pub renew_every: Option<Duration>,
    /// Slack on top of `ttl - renew_every` before a renewal counts as missed.
    pub renew_grace: Duration,
    pub max_hold: Option<Duration>,
    pub value: ValueKind,
    pub fence_pattern: Option<Glob>,
    pub log_phrases: Vec<String>,
    /// Alert thresholds: `[alerts]` with this namespace's `[namespace.alerts]` on top.
    pub alerts: Thresholds,
}

impl NamespaceConfig {
    /// Remaining TTL below which a renewed lock's holder has missed a renewal; `None` when
    /// the namespace's locks are not renewed.
    /// Maps this namespace's lock keys to their fencing counters' keys.
    pub fn fence_map(&self) -> FenceMap {
        FenceMap::new(self)
    }

    pub fn overdue_below(&self) -> Option<Duration> {
        let every = self.renew_every?;
        Some(self.ttl.saturating_sub(every).saturating_sub(self.renew_grace))
    }
}

/// From a lock key to its fencing counter's key, when both patterns are `prefix*suffix`:
/// the part in place of `*` is the lock's id, the same in both.
pub struct FenceMap {
    lock: Option<(Vec<u8>, Vec<u8>)>,
    fence: Option<(Vec<u8>, Vec<u8>)>,
}

impl FenceMap {
    pub fn new(ns: &NamespaceConfig) -> Self {
        FenceMap {
            lock: ns.pattern.single_wildcard(),
            fence: ns.fence_pattern.as_ref().and_then(|f| f.single_wildcard()),
        }
    }

    pub fn key_for(&self, lock_key: &[u8]) -> Option<Vec<u8>> {
        let ((lp, ls), (fp, fs)) = (self.lock.as_ref()?, self.fence.as_ref()?);
        let id = lock_key.strip_prefix(lp.as_slice())?.strip_suffix(ls.as_slice())?;
        Some([fp.as_slice(), id, fs.as_slice()].concat())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Auto,
    Json,
    Logfmt,
    Text,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    End,
    Beginning,
}

#[derive(Debug, Clone)]
pub struct LogConfig {
    pub name: String,
    /// A file glob, or `-` for stdin.
    pub path: String,
    pub format: LogFormat,
    pub start_at: StartAt,
}

#[derive(Debug, Clone)]
pub struct RuleConfig {
    pub pattern: regex::Regex,
    pub op: Op,
    pub outcome: Outcome,
    pub namespace: Option<String>,
}

impl Config {
    /// Read, parse and validate `path`, applying `overrides`.
    pub fn load(path: &Path, overrides: &Overrides) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Self::from_toml(&text, &path.display().to_string(), base, overrides)
    }

    /// Parse and validate TOML text; relative paths in it are taken from `base`.
    pub fn from_toml(text: &str, source: &str, base: &Path, overrides: &Overrides) -> Result<Config, ConfigError> {
        let cx = Cx { text, file: source };
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let message = e.message().trim().to_string();
            // serde's shape errors name the key themselves; anything else is TOML syntax.
            let shape = ["unknown field", "missing field", "invalid type", "invalid value"];
            let key = if shape.iter().any(|s| message.starts_with(s)) {
                // A wrong value's span is the value itself: its line names the key.
                e.span()
                    .and_then(|sp| text.lines().nth(cx.line(&sp) - 1))
                    .and_then(|l| l.split_once('='))
                    .map(|(k, _)| k.trim().to_string())
                    .filter(|k| !k.is_empty() && !k.starts_with('['))
                    .unwrap_or_else(|| "schema".to_string())
            } else {
                "syntax".to_string()
            };
            ConfigError::Invalid {
                file: source.to_string(),
                line: e.span().map(|s| cx.line(&s)),
                key,
                message,
            }
        })?;
        cx.validate(raw, base, overrides)
    }

    pub fn namespace(&self, name: &str) -> Option<&NamespaceConfig> {
        self.namespaces.iter().find(|n| n.name == name)
    }
}

/// Validation context: the source text, to turn spans into line numbers.
struct Cx<'a> {
    text: &'a str,
    file: &'a str,
}

impl Cx<'_> {
    fn line(&self, span: &Range<usize>) -> usize {
        let end = span.start.min(self.text.len());
        self.text.as_bytes()[..end].iter().filter(|b| **b == b'\n').count() + 1
    }

    fn err(&self, span: Option<&Range<usize>>, key: impl Into<String>, message: impl fmt::Display) -> ConfigError {
        ConfigError::Invalid {
            file: self.file.to_string(),
            line: span.map(|s| self.line(s)),
            key: key.into(),
            message: message.to_string(),
        }
    }

    fn duration(&self, v: &S<String>, key: &str) -> Result<Duration, ConfigError> {
        let d = duration::parse(v.get_ref()).map_err(|e| self.err(Some(&v.span()), key, e))?;
        if d.is_zero() {
            return Err(self.err(Some(&v.span()), key, "must be greater than zero"));
        }
        Ok(d)
    }

    fn name(&self, v: &S<String>, key: &str) -> Result<String, ConfigError> {
        let s = v.get_ref();
        let ok = !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.:".contains(&b));
        if !ok {
            return Err(self.err(
                Some(&v.span()),
                key,
                format!("`{s}` is not a valid name: use 1-64 characters from A-Z a-z 0-9 _ - . :"),
            ));
        }
        Ok(s.clone())
    }

    fn validate(&self, raw: RawConfig, base: &Path, ov: &Overrides) -> Result<Config, ConfigError> {
        let server = self.server(raw.server.unwrap_or_default(), base, ov)?;
        let targets = self.targets(raw.target, base, ov)?;
        let alerts = self.alerts(raw.alerts)?;
        let namespaces = self.namespaces(raw.namespace, alerts.defaults)?;
        let logs = self.logs(raw.logs, base)?;
        let rules = self.rules(raw.rule, &namespaces)?;
        let state_dir = raw.state.and_then(|s| s.dir).map(|d| base.join(d.get_ref()));
        Ok(Config {
            source: self.file.to_string(),
            server,
            targets,
            namespaces,
            logs,
            rules,
            state_dir,
            alerts,
        })
    }

    fn server(&self, raw: raw::RawServer, base: &Path, ov: &Overrides) -> Result<ServerConfig, ConfigError> {
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
        Ok(ServerConfig {
            listen,
            push_token,
            show_owners: raw.show_owners.unwrap_or(false),
        })
    }

    fn targets(&self, raw: Vec<RawTarget>, base: &Path, ov: &Overrides) -> Result<Vec<TargetConfig>, ConfigError> {
        if ov.redis_url.is_some() && raw.len() > 1 {
            return Err(self.err(
                None,
                "--redis-url",
                format!(
                    "the config has {} targets; --redis-url can only replace the url of a single target",
                    raw.len()
                ),
            ));
        }
        if raw.is_empty() {
            let Some(url) = &ov.redis_url else {
                return Err(self.err(None, "target", "no [[target]] configured: add one, or pass --redis-url"));
            };
            let target = RawTarget {
                name: S::new(0..0, "main".to_string()),
                environment: None,
                url: S::new(0..0, url.clone()),
                password_file: None,
                sample_interval: None,
                scan_count: None,
                sample_budget: None,
                notifications: None,
            };
            return Ok(vec![self.target(target, 0, base, ov)?]);
        }
        let mut out: Vec<TargetConfig> = Vec::with_capacity(raw.len());
        for (i, t) in raw.into_iter().enumerate() {
            let name_span = t.name.span();
            let target = self.target(t, i, base, ov)?;
            if out.iter().any(|o| o.name == target.name) {
                return Err(self.err(
                    Some(&name_span),
                    format!("target[{i}].name"),
                    format!("duplicate target name `{}`", target.name),
                ));
            }
            out.push(target);
        }
        Ok(out)
    }

    fn target(&self, t: RawTarget, i: usize, base: &Path, ov: &Overrides) -> Result<TargetConfig, ConfigError> {
        let k = |field: &str| format!("target[{i}].{field}");
        let name = self.name(&t.name, &k("name"))?;
        let (url, url_span, url_key) = match &ov.redis_url {
            Some(u) => (u.clone(), None, "--redis-url".to_string()),
            None => (t.url.get_ref().clone(), Some(t.url.span()), k("url")),
        };
        let info = url.as_str().into_connection_info().map_err(|e| {
            self.err(
                url_span.as_ref(),
                &url_key,
                format!("not a Redis URL ({e}): write redis://host:port/db or rediss:// for TLS"),
            )
        })?;
        let password = match (&t.password_file, &ov.redis_password_file, &ov.redis_password) {
            (Some(f), _, _) => Some(
                read_secret(&base.join(f.get_ref())).map_err(|e| self.err(Some(&f.span()), k("password_file"), e))?,
            ),
            (None, Some(f), _) => Some(read_secret(f).map_err(|e| self.err(None, "LOCKWATCH_REDIS_PASSWORD_FILE", e))?),
            (None, None, Some(p)) => Some(p.clone()),
            (None, None, None) => None,
        };
        let connection = match password {
            Some(p) => {
                let settings = info.redis_settings().clone().set_password(p.expose());
                info.set_redis_settings(settings)
            }
            None => info,
        };
        let sample_interval = match &t.sample_interval {
            Some(v) => self.duration(v, &k("sample_interval"))?,
            None => Duration::from_secs(5),
        };
        let sample_budget = match &t.sample_budget {
            Some(v) => self.duration(v, &k("sample_budget"))?,
            None => Duration::from_secs(2).min(sample_interval),
        };
        if sample_budget > sample_interval {
            let span = t.sample_budget.as_ref().map(|s| s.span());
            return Err(self.err(
                span.as_ref(),
                k("sample_budget"),
                format!(
                    "{} is longer than sample_interval ({}): a pass must end before the next one is due",
                    duration::format(sample_budget),
                    duration::format(sample_interval)
                ),
            ));
        }
        let scan_count = match &t.scan_count {
            Some(v) if !(1..=100_000).contains(v.get_ref()) => {
                return Err(self.err(
                    Some(&v.span()),
                    k("scan_count"),
                    format!("{} is out of range 1..=100000", v.get_ref()),
                ));
            }
            Some(v) => *v.get_ref() as usize,
            None => 500,
        };
        let notifications = match &t.notifications {
            None => Notifications::Auto,
            Some(v) => match v.get_ref().as_str() {
                "auto" => Notifications::Auto,
                "require" => Notifications::Require,
                "off" => Notifications::Off,
                "configure" => Notifications::Configure,
                other => {
                    return Err(self.err(
                        Some(&v.span()),
                        k("notifications"),
                        format!("`{other}` is not one of auto, require, off, configure"),
                    ));
                }
            },
        };
        Ok(TargetConfig {
            name,
            environment: t.environment.map(|e| e.into_inner()),
            display_url: redact_url(&url),
            connection,
            sample_interval,
            scan_count,
            sample_budget,
            notifications,
        })
    }

    fn namespaces(&self, raw: Vec<RawNamespace>, defaults: Thresholds) -> Result<Vec<NamespaceConfig>, ConfigError> {
        let mut out: Vec<NamespaceConfig> = Vec::with_capacity(raw.len());
        for (i, n) in raw.into_iter().enumerate() {
            let k = |field: &str| format!("namespace[{i}].{field}");
            let name = self.name(&n.name, &k("name"))?;
            if name == UNKNOWN_NAMESPACE {
                return Err(self.err(
                    Some(&n.name.span()),
                    k("name"),
                    "`unknown` is reserved for events that match no namespace",
                ));
            }
            if out.iter().any(|o| o.name == name) {
                return Err(self.err(
                    Some(&n.name.span()),
                    k("name"),
                    format!("duplicate namespace name `{name}`"),
                ));
            }
            let pattern = Glob::new(n.pattern.get_ref()).map_err(|e| {
                self.err(
                    Some(&n.pattern.span()),
                    k("pattern"),
                    format!("bad glob `{}`: {e}", n.pattern.get_ref()),
                )
            })?;
            let fence_pattern = match &n.fence_pattern {
                Some(f) => Some(Glob::new(f.get_ref()).map_err(|e| {
                    self.err(
                        Some(&f.span()),
                        k("fence_pattern"),
                        format!("bad glob `{}`: {e}", f.get_ref()),
                    )
                })?),
                None => None,
            };
            let ttl = self.duration(&n.ttl, &k("ttl"))?;
            let renew_every = match &n.renew_every {
                Some(v) => {
                    let every = self.duration(v, &k("renew_every"))?;
                    if every >= ttl {
                        return Err(self.err(
                            Some(&v.span()),
                            k("renew_every"),
                            format!(
                                "{} is not shorter than ttl ({}): the lock would expire before its renewal",
                                duration::format(every),
                                duration::format(ttl)
                            ),
                        ));
                    }
                    Some(every)
                }
                None => None,
            };
            let renew_grace =
                match (&n.renew_grace, renew_every) {
                    (Some(v), None) => {
                        return Err(self.err(Some(&v.span()), k("renew_grace"), "renew_grace needs renew_every"));
                    }
                    (Some(v), Some(every)) => {
                        let grace = self.duration(v, &k("renew_grace"))?;
                        if grace >= ttl - every {
                            return Err(self.err(Some(&v.span()), k("renew_grace"), format!(
                            "{} leaves no room: ttl - renew_every is {}, so no lock could ever count as overdue",
                            duration::format(grace), duration::format(ttl - every))));
                        }
                        grace
                    }
                    // Half of the smaller of the renewal period and the margin left after it.
                    (None, Some(every)) => every.min(ttl - every) / 2,
                    (None, None) => Duration::ZERO,
                };
            let max_hold = n
                .max_hold
                .as_ref()
                .map(|v| self.duration(v, &k("max_hold")))
                .transpose()?;
            let value = match &n.value {
                None => ValueKind::Token,
                Some(v) => parse_value_kind(v.get_ref()).ok_or_else(|| {
                    self.err(
                        Some(&v.span()),
                        k("value"),
                        format!("`{}` is not one of token, json:<field>, redisson", v.get_ref()),
                    )
                })?,
            };
            let mut log_phrases = Vec::with_capacity(n.log_phrases.len());
            for (j, p) in n.log_phrases.iter().enumerate() {
                if p.get_ref().trim().is_empty() {
                    return Err(self.err(
                        Some(&p.span()),
                        format!("namespace[{i}].log_phrases[{j}]"),
                        "empty phrase would match every line",
                    ));
                }
                log_phrases.push(p.get_ref().to_lowercase());
            }
            let ns = NamespaceConfig {
                name,
                pattern,
                ttl,
                renew_every,
                renew_grace,
                max_hold,
                value,
                fence_pattern,
                log_phrases,
                alerts: self.thresholds(&n.alerts, defaults, &k("alerts"))?,
            };
            self.check_overlaps(&ns, i, &n, &out)?;
            out.push(ns);
        }
        Ok(out)
    }

    /// A key must belong to one namespace only, and a fence counter must never look like a lock.
    fn check_overlaps(
        &self,
        ns: &NamespaceConfig,
        i: usize,
        raw: &RawNamespace,
        earlier: &[NamespaceConfig],
    ) -> Result<(), ConfigError> {
        let show = |k: &[u8]| String::from_utf8_lossy(k).into_owned();
        if let Some(f) = &ns.fence_pattern
            && let Some(key) = f.overlap(&ns.pattern)
        {
            let span = raw.fence_pattern.as_ref().map(|f| f.span());
            return Err(self.err(span.as_ref(), format!("namespace[{i}].fence_pattern"), format!(
                "`{f}` overlaps the lock pattern `{}` (both match e.g. `{}`): fence counters need keys of their own", ns.pattern, show(&key))));
        }
        for o in earlier {
            let mine = std::iter::once(("pattern", &ns.pattern))
                .chain(ns.fence_pattern.as_ref().map(|f| ("fence_pattern", f)));
            for (field, g) in mine {
                let theirs = std::iter::once(&o.pattern).chain(o.fence_pattern.as_ref());
                for og in theirs {
                    if let Some(key) = g.overlap(og) {
                        let span = if field == "pattern" {
                            Some(raw.pattern.span())
                        } else {
                            raw.fence_pattern.as_ref().map(|f| f.span())
                        };
                        return Err(self.err(span.as_ref(), format!("namespace[{i}].{field}"), format!(
                            "`{g}` and namespace `{}`'s `{og}` can match the same key (e.g. `{}`): make the patterns disjoint so every lock has one namespace",
                            o.name, show(&key))));
                    }
                }
            }
        }
        Ok(())
    }

    fn logs(&self, raw: Vec<raw::RawLogs>, base: &Path) -> Result<Vec<LogConfig>, ConfigError> {
        let mut out: Vec<LogConfig> = Vec::new();
        for (i, l) in raw.into_iter().enumerate() {
            let k = |field: &str| format!("logs[{i}].{field}");
            let name = self.name(&l.name, &k("name"))?;
            if out.iter().any(|o| o.name == name) {
                return Err(self.err(Some(&l.name.span()), k("name"), format!("duplicate logs name `{name}`")));
            }
            if l.path.get_ref().trim().is_empty() {
                return Err(self.err(Some(&l.path.span()), k("path"), "empty path"));
            }
            if name == PUSH_SOURCE {
                return Err(self.err(
                    Some(&l.name.span()),
                    k("name"),
                    "`push` is the source name of POST /api/v1/events; choose another",
                ));
            }
            let path = if l.path.get_ref() == "-" {
                if out.iter().any(|o| o.path == "-") {
                    return Err(self.err(
                        Some(&l.path.span()),
                        k("path"),
                        "only one [[logs]] can read stdin (`-`)",
                    ));
                }
                "-".to_string()
            } else {
                let p = base.join(l.path.get_ref()).display().to_string();
                if let Err(e) = glob::Pattern::new(&p) {
                    return Err(self.err(Some(&l.path.span()), k("path"), format!("not a valid glob: {e}")));
                }
                p
            };
            let format = match l.format.as_ref().map(|f| f.get_ref().as_str()) {
                None | Some("auto") => LogFormat::Auto,
                Some("json") => LogFormat::Json,
                Some("logfmt") => LogFormat::Logfmt,
                Some("text") => LogFormat::Text,
                Some(other) => {
                    let span = l.format.as_ref().map(|f| f.span());
                    return Err(self.err(
                        span.as_ref(),
                        k("format"),
                        format!("`{other}` is not one of auto, json, logfmt, text"),
                    ));
                }
            };
            let start_at = match l.start_at.as_ref().map(|f| f.get_ref().as_str()) {
                None | Some("end") => StartAt::End,
                Some("beginning") => StartAt::Beginning,
                Some(other) => {
                    let span = l.start_at.as_ref().map(|f| f.span());
                    return Err(self.err(
                        span.as_ref(),
                        k("start_at"),
                        format!("`{other}` is not one of end, beginning"),
                    ));
                }
            };
            out.push(LogConfig {
                name,
                path,
                format,
                start_at,
            });
        }
        Ok(out)
    }

    fn rules(&self, raw: Vec<raw::RawRule>, namespaces: &[NamespaceConfig]) -> Result<Vec<RuleConfig>, ConfigError> {
        raw.into_iter()
            .enumerate()
            .map(|(i, r)| {
                let k = |field: &str| format!("rule[{i}].{field}");
                let pattern = regex::RegexBuilder::new(r.pattern.get_ref())
                    .size_limit(1 << 20)
                    .build()
                    .map_err(|e| self.err(Some(&r.pattern.span()), k("match"), format!("bad regex: {e}")))?;
                let op =
                    r.op.get_ref()
                        .parse::<Op>()
                        .map_err(|e| self.err(Some(&r.op.span()), k("op"), e))?;
                let outcome = r
                    .outcome
                    .get_ref()
                    .parse::<Outcome>()
                    .map_err(|e| self.err(Some(&r.outcome.span()), k("outcome"), e))?;
                if let Some(ns) = &r.namespace
                    && ns.get_ref() != UNKNOWN_NAMESPACE
                    && !namespaces.iter().any(|n| &n.name == ns.get_ref())
                {
                    return Err(self.err(
                        Some(&ns.span()),
                        k("namespace"),
                        format!("`{}` is not a configured namespace", ns.get_ref()),
                    ));
                }
                Ok(RuleConfig {
                    pattern,
                    op,
                    outcome,
                    namespace: r.namespace.map(|n| n.into_inner()),
                })
            })
            .collect()
    }
}

fn parse_value_kind(s: &str) -> Option<ValueKind> {
    match s {
        "token" => Some(ValueKind::Token),
        "redisson" => Some(ValueKind::Redisson),
        _ => {
            let path = s.strip_prefix("json:")?;
            let parts: Vec<String> = path.split('.').map(str::to_string).collect();
            (!parts.iter().any(String::is_empty)).then_some(ValueKind::Json(parts))
        }
    }
}

/// `host:port`, or `:port` for every interface (the Prometheus exporters' convention).
fn parse_listen(s: &str) -> Option<SocketAddr> {
    if let Some(port) = s.strip_prefix(':') {
        return format!("0.0.0.0:{port}").parse().ok();
    }
    if let Some(port) = s.strip_prefix("localhost:") {
        return format!("127.0.0.1:{port}").parse().ok();
    }
    s.parse().ok()
}

/// Read a secret file: surrounding whitespace (a trailing newline) is not part of it.
fn read_secret(path: &Path) -> Result<Secret, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let s = text.trim();
    if s.is_empty() {
        return Err(format!("{} is empty", path.display()));
    }
    Ok(Secret::new(s))
}

/// The URL with any password replaced by `***` — in the user info (`user:pw@`) and in a
/// unix-socket URL's `pass=` parameter — for logs and status pages.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let mut out = match authority.rfind('@') {
        Some(at) => {
            let userinfo = &authority[..at];
            let user = userinfo.split(':').next().unwrap_or("");
            let shown = if userinfo.contains(':') {
                format!("{user}:***")
            } else {
                "***".to_string()
            };
            format!("{}://{shown}@{}", &url[..scheme_end], &rest[at + 1..])
        }
        None => url.to_string(),
    };
    if let Some(q) = out.find('?') {
        let params: Vec<String> = out[q + 1..]
            .split('&')
            .map(|p| match p.split_once('=') {
                Some(("pass" | "password", _)) => format!("{}=***", p.split('=').next().unwrap_or("pass")),
                _ => p.to_string(),
            })
            .collect();
        out = format!("{}?{}", &out[..q], params.join("&"));
    }
    out
}

#[cfg(test)]
mod tests;
