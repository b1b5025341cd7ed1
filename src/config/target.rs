//! `[[target]]`: the Redis servers to watch — name, URL with its password (from
//! `password_file`, `--redis-password-file` or `LOCKWATCH_REDIS_PASSWORD`), the sampling
//! pace, the keyspace-notification policy and the TLS files of a `rediss://` URL (read and
//! checked here, so a bad certificate is a config error) — and `redact_url` for showing a URL
//! safely. Connecting is `access::connect`'s job.

use std::path::Path;
use std::time::Duration;

use super::choice::choice_enum;
use super::raw::{RawTarget, S};
use super::secret::read_secret;
use super::tls::TargetTls;
use super::topology::Topology;
use super::{ConfigError, Cx, Overrides, Secret};
use crate::duration;

choice_enum!(
    /// What to do about the keyspace notifications the lifecycle watcher needs (`notifications`).
    Notifications {
        /// Check `notify-keyspace-events`, warn when flags are missing, subscribe anyway.
        #[default]
        Auto => "auto",
        /// Refuse to start when they are off or cannot be checked.
        Require => "require",
        /// No lifecycle watcher.
        Off => "off",
        /// Add the missing flags with `CONFIG SET`, keeping those already set.
        Configure => "configure",
    }
);

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
    /// Events mode: how often a reconciling SCAN walk starts (after the last one began).
    pub reconcile_interval: Duration,
    /// Events mode: keys per second the reconciling SCAN walks, at most.
    pub reconcile_rate: u64,
    /// `tls_*`: the CA and client certificate of a `rediss://` URL; empty otherwise.
    pub tls: TargetTls,
    /// `mode` and the nodes it starts from.
    pub topology: Topology,
}

impl TargetConfig {
    /// `redis-cli`'s TLS options for this target, ending in a space: `--tls` where the
    /// address is given by `-h`/`-p` (`with_url`: a `rediss://` URL says it), `--insecure`
    /// where the certificate goes unverified (`tls_insecure_skip_verify`).
    pub fn cli_tls(&self, with_url: bool) -> &'static str {
        let tls = matches!(self.connection.addr(), redis::ConnectionAddr::TcpTls { .. });
        match (tls, with_url, self.tls.insecure) {
            (false, ..) => "",
            (true, true, false) => "",
            (true, true, true) => "--insecure ",
            (true, false, false) => "--tls ",
            (true, false, true) => "--tls --insecure ",
        }
    }
}

/// Default `reconcile_rate`: about 0.4 % of a Redis core (SCAN MATCH costs ~1.9 µs of
/// server CPU per key walked in a 10M-key database), which walks 10M keys in ~83 minutes.
pub const DEFAULT_RECONCILE_RATE: u64 = 2_000;

impl Cx<'_> {
    pub(super) fn targets(
        &self,
        raw: Vec<RawTarget>,
        base: &Path,
        ov: &Overrides,
    ) -> Result<Vec<TargetConfig>, ConfigError> {
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
                url: Some(S::new(0..0, url.clone())),
                mode: None,
                nodes: None,
                sentinels: None,
                master_name: None,
                sentinel_password_file: None,
                password_file: None,
                sample_interval: None,
                scan_count: None,
                sample_budget: None,
                notifications: None,
                reconcile_interval: None,
                reconcile_rate: None,
                tls_ca_file: None,
                tls_cert_file: None,
                tls_key_file: None,
                tls_server_name: None,
                tls_insecure_skip_verify: None,
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
        let url = match (&ov.redis_url, &t.url) {
            (Some(u), _) => Some((u.clone(), None, "--redis-url".to_string())),
            (None, Some(u)) => Some((u.get_ref().clone(), Some(u.span()), k("url"))),
            (None, None) => None,
        };
        let (template, mut topology) = self.topology(&t, i, url, base)?;
        let tls = self.tls(&t, i, base, &template.info, &template.url)?;
        let password = self.password(&t, i, base, ov)?;
        let with_password = |info: redis::ConnectionInfo| match &password {
            Some(p) => {
                let settings = info.redis_settings().clone().set_password(p.expose());
                info.set_redis_settings(settings)
            }
            None => info,
        };
        if let Topology::Cluster { seeds } = &mut topology {
            *seeds = seeds
                .drain(..)
                .map(with_password)
                .map(|s| unverified(s, tls.insecure))
                .collect();
        }
        if let Topology::Sentinel(s) = &mut topology {
            s.sentinels = s.sentinels.drain(..).map(|s| unverified(s, tls.insecure)).collect();
        }
        let connection = unverified(with_password(template.info), tls.insecure);
        let url = template.url;
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
        let notifications = self.choice(t.notifications.as_ref(), &k("notifications"))?;
        let reconcile_interval = match &t.reconcile_interval {
            Some(v) => self.duration(v, &k("reconcile_interval"))?,
            None => Duration::from_secs(600),
        };
        let reconcile_rate = match &t.reconcile_rate {
            Some(v) if !(10..=10_000_000).contains(v.get_ref()) => {
                return Err(self.err(
                    Some(&v.span()),
                    k("reconcile_rate"),
                    format!("{} is out of range 10..=10000000 (keys per second)", v.get_ref()),
                ));
            }
            Some(v) => *v.get_ref() as u64,
            None => DEFAULT_RECONCILE_RATE,
        };
        Ok(TargetConfig {
            name,
            environment: t.environment.map(|e| e.into_inner()),
            display_url: display(&url, &topology),
            connection,
            sample_interval,
            scan_count,
            sample_budget,
            notifications,
            reconcile_interval,
            reconcile_rate,
            tls,
            topology,
        })
    }

    /// The target's own `password_file` first, then `--redis-password-file`, then
    /// `LOCKWATCH_REDIS_PASSWORD`; none means the URL's own password, if any.
    fn password(&self, t: &RawTarget, i: usize, base: &Path, ov: &Overrides) -> Result<Option<Secret>, ConfigError> {
        Ok(match (&t.password_file, &ov.redis_password_file, &ov.redis_password) {
            (Some(f), _, _) => Some(
                read_secret(&base.join(f.get_ref()))
                    .map_err(|e| self.err(Some(&f.span()), format!("target[{i}].password_file"), e))?,
            ),
            (None, Some(f), _) => Some(read_secret(f).map_err(|e| self.err(None, "LOCKWATCH_REDIS_PASSWORD_FILE", e))?),
            (None, None, Some(p)) => Some(p.clone()),
            (None, None, None) => None,
        })
    }
}

/// How the target is shown in logs and on the status page: the URL without its password,
/// and for a cluster or Sentinel group, the mode and where it is found.
fn display(url: &str, topology: &Topology) -> String {
    match topology {
        Topology::Standalone => redact_url(url),
        Topology::Cluster { seeds } => format!("cluster via {} seed node(s), first {}", seeds.len(), redact_url(url)),
        Topology::Sentinel(s) => format!(
            "sentinel master `{}` via {} sentinel(s)",
            s.master_name,
            s.sentinels.len()
        ),
    }
}

/// The URL with any password replaced by `***` — in the user info (`user:pw@`) and in a
/// unix-socket URL's `pass=` parameter — for logs and status pages.
pub(crate) fn redact_url(url: &str) -> String {
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

/// `info` with its server's certificate left unverified when `insecure` (and it is TLS):
/// `tls_insecure_skip_verify`, for every connection made from it.
fn unverified(info: redis::ConnectionInfo, insecure: bool) -> redis::ConnectionInfo {
    match info.addr().clone() {
        redis::ConnectionAddr::TcpTls {
            host, port, tls_params, ..
        } if insecure => info.set_addr(redis::ConnectionAddr::TcpTls {
            host,
            port,
            insecure: true,
            tls_params,
        }),
        _ => info,
    }
}
