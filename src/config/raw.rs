//! The TOML file as written: serde shapes with source spans, nothing validated yet.
//!
//! Every table refuses unknown keys, so a typo is an error that names the key and line
//! rather than a silently ignored setting. Validation lives in each section's module.

use serde::Deserialize;
use toml::Spanned;

pub type S<T> = Spanned<T>;

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub server: Option<RawServer>,
    #[serde(default)]
    pub target: Vec<RawTarget>,
    #[serde(default)]
    pub namespace: Vec<RawNamespace>,
    #[serde(default)]
    pub logs: Vec<RawLogs>,
    #[serde(default)]
    pub rule: Vec<RawRule>,
    pub state: Option<RawState>,
    pub alerts: Option<RawAlerts>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    pub listen: Option<S<String>>,
    pub push_token_file: Option<S<String>>,
    pub show_owners: Option<bool>,
    pub web_config_file: Option<S<String>>,
    pub max_connections: Option<S<i64>>,
    pub header_timeout: Option<S<String>>,
    pub body_timeout: Option<S<String>>,
    pub idle_timeout: Option<S<String>>,
    pub trace_url: Option<S<String>>,
    pub max_drills: Option<S<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTarget {
    pub name: S<String>,
    pub environment: Option<S<String>>,
    pub url: Option<S<String>>,
    pub mode: Option<S<String>>,
    pub nodes: Option<S<Vec<String>>>,
    pub sentinels: Option<S<Vec<String>>>,
    pub master_name: Option<S<String>>,
    pub sentinel_password_file: Option<S<String>>,
    pub password_file: Option<S<String>>,
    pub sample_interval: Option<S<String>>,
    pub scan_count: Option<S<i64>>,
    pub sample_budget: Option<S<String>>,
    pub notifications: Option<S<String>>,
    pub reconcile_interval: Option<S<String>>,
    pub reconcile_rate: Option<S<i64>>,
    pub tls_ca_file: Option<S<String>>,
    pub tls_cert_file: Option<S<String>>,
    pub tls_key_file: Option<S<String>>,
    pub tls_server_name: Option<S<String>>,
    pub tls_insecure_skip_verify: Option<S<bool>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNamespace {
    pub name: S<String>,
    pub pattern: S<String>,
    pub ttl: S<String>,
    pub renew_every: Option<S<String>>,
    pub renew_grace: Option<S<String>>,
    pub max_hold: Option<S<String>>,
    pub value: Option<S<String>>,
    pub fence_pattern: Option<S<String>>,
    #[serde(default)]
    pub log_phrases: Vec<S<String>>,
    #[serde(default)]
    pub alerts: RawThresholds,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLogs {
    pub name: S<String>,
    pub path: S<String>,
    pub format: Option<S<String>>,
    pub start_at: Option<S<String>>,
    pub multiline: Option<S<String>>,
    pub rotated: Option<S<String>>,
    pub rotated_grace: Option<S<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRule {
    #[serde(rename = "match")]
    pub pattern: S<String>,
    pub op: S<String>,
    pub outcome: S<String>,
    pub namespace: Option<S<String>>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawState {
    pub dir: Option<S<String>>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawAlerts {
    pub job: Option<S<String>>,
    pub runbook_base_url: Option<S<String>>,
    pub dashboard_base_url: Option<S<String>>,
    // The defaults of `RawThresholds`, spelled out: spans do not survive `flatten`.
    pub not_owned_budget: Option<S<f64>>,
    pub renew_failure_budget: Option<S<f64>>,
    pub min_bad_events: Option<S<i64>>,
    pub min_takeovers: Option<S<i64>>,
    pub min_contention_timeouts: Option<S<i64>>,
    pub headroom_fraction: Option<S<f64>>,
    pub near_miss_budget: Option<S<f64>>,
    pub drill_left_frozen_after: Option<S<String>>,
    pub drill_max_age: Option<S<String>>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawThresholds {
    pub not_owned_budget: Option<S<f64>>,
    pub renew_failure_budget: Option<S<f64>>,
    pub min_bad_events: Option<S<i64>>,
    pub min_takeovers: Option<S<i64>>,
    pub min_contention_timeouts: Option<S<i64>>,
    pub headroom_fraction: Option<S<f64>>,
    pub near_miss_budget: Option<S<f64>>,
    pub drill_left_frozen_after: Option<S<String>>,
    pub drill_max_age: Option<S<String>>,
}
