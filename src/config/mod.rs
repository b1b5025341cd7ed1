//! The validated configuration: one object, built once from the TOML file plus command-line
//! and environment overrides, that every working part reads. This module owns `Config`, its
//! loading, the mapping of TOML errors to `ConfigError` and the validation context `Cx`;
//! each section's types and checks live in their own file. Nothing here touches Redis.

mod alerts;
mod choice;
mod logs;
mod namespace;
mod raw;
mod rules;
mod secret;
mod server;
mod target;
mod tls;
mod topology;
mod web;
mod web_cert;
mod web_tls;

pub use alerts::{AlertsConfig, Thresholds};
pub use logs::{DEFAULT_ROTATED_GRACE, LogConfig, LogFormat, Multiline, StartAt};
pub use namespace::{NamespaceConfig, ValueKind};
pub use rules::RuleConfig;
pub use secret::Secret;
pub use server::{HttpLimits, ServerConfig, TraceUrl};
pub use target::{Notifications, TargetConfig};
pub use tls::{ClientIdentity, PemFile, TargetTls};
pub use topology::{Mode, SentinelSettings, Topology};
pub use web::WebConfig;
pub use web_tls::ClientAuth;
// The crate's paths to these stay `crate::config::…`; no module outside config names them
// today (`fence_map()` hands out a `FenceMap` without naming it).
#[allow(unused_imports)]
pub(crate) use {namespace::FenceMap, server::DEFAULT_LISTEN, target::redact_url};

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::duration;
use raw::{RawConfig, S};

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

/// Settings given on the command line or in `LOCKWATCH_*` variables; they win over the file.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub listen: Option<String>,
    /// Replaces the `url` of the only target (an error when the file has several).
    pub redis_url: Option<String>,
    /// For every target that has no `password_file` of its own.
    pub redis_password: Option<Secret>,
    pub redis_password_file: Option<PathBuf>,
    /// `--web.config.file`: replaces `[server] web_config_file`.
    pub web_config_file: Option<PathBuf>,
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
        let raw: RawConfig = toml::from_str(text).map_err(|e| cx.toml_error(&e))?;
        cx.validate(raw, base, overrides)
    }

    pub(crate) fn namespace(&self, name: &str) -> Option<&NamespaceConfig> {
        self.namespaces.iter().find(|n| n.name == name)
    }

    /// The target named `name`, or the only one when no name is given (commands' `--target`).
    pub fn target(&self, name: Option<&str>) -> Result<&TargetConfig, TargetChoice> {
        match name {
            Some(n) => self
                .targets
                .iter()
                .find(|t| t.name == n)
                .ok_or_else(|| TargetChoice::Unknown(n.to_string())),
            None => match self.targets.as_slice() {
                [only] => Ok(only),
                all => Err(TargetChoice::Which(all.len())),
            },
        }
    }
}

/// Why `--target` named no target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetChoice {
    #[error("no target `{0}` in the config")]
    Unknown(String),
    #[error("the config has {0} targets; choose one with --target")]
    Which(usize),
}

/// Validation context: the source text, to turn spans into line numbers, and the file name
/// every error carries. Each section's checks are `impl Cx` blocks in that section's file.
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

    /// A TOML or shape error, keyed by the setting it is about when serde names one.
    fn toml_error(&self, e: &toml::de::Error) -> ConfigError {
        let message = e.message().trim().to_string();
        // serde's shape errors name the key themselves; anything else is TOML syntax.
        let shape = ["unknown field", "missing field", "invalid type", "invalid value"];
        let key = if shape.iter().any(|s| message.starts_with(s)) {
            // A wrong value's span is the value itself: its line names the key.
            e.span()
                .and_then(|sp| self.text.lines().nth(self.line(&sp) - 1))
                .and_then(|l| l.split_once('='))
                .map(|(k, _)| k.trim().to_string())
                .filter(|k| !k.is_empty() && !k.starts_with('['))
                .unwrap_or_else(|| "schema".to_string())
        } else {
            "syntax".to_string()
        };
        ConfigError::Invalid {
            file: self.file.to_string(),
            line: e.span().map(|s| self.line(&s)),
            key,
            message,
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
}

#[cfg(test)]
mod tests;
