//! `[[target]]`: the Redis servers to watch — name, URL with its password (from
//! `password_file`, `--redis-password-file` or `LOCKWATCH_REDIS_PASSWORD`), the sampling
//! pace, the keyspace-notification policy and the TLS files of a `rediss://` URL (read and
//! checked here, so a bad certificate is a config error) — and `redact_url` for showing a URL
//! safely. Connecting is `access::connect`'s job.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use redis::IntoConnectionInfo;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::choice::choice_enum;
use super::raw::{RawTarget, S};
use super::secret::read_secret;
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
}

/// The TLS files of a `rediss://` target, read and parsed at load. With neither set, the
/// system's roots are trusted and no client certificate is offered.
#[derive(Debug, Clone, Default)]
pub struct TargetTls {
    /// `tls_ca_file`: the CA bundle trusted instead of the system roots.
    pub ca: Option<PemFile>,
    /// `tls_cert_file` + `tls_key_file`: for servers with `tls-auth-clients`.
    pub client: Option<ClientIdentity>,
}

/// A PEM file as read at load. Its Debug shows the path only.
#[derive(Clone)]
pub struct PemFile {
    pub path: PathBuf,
    pub pem: Vec<u8>,
}

impl fmt::Debug for PemFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PemFile")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// A client certificate chain and its private key; the key is a [`Secret`].
#[derive(Debug, Clone)]
pub struct ClientIdentity {
    pub cert: PemFile,
    pub key_path: PathBuf,
    pub key: Secret,
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
                url: S::new(0..0, url.clone()),
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
        let tls = self.tls(&t, i, base, &info, &url)?;
        let connection = match self.password(&t, i, base, ov)? {
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
            display_url: redact_url(&url),
            connection,
            sample_interval,
            scan_count,
            sample_budget,
            notifications,
            reconcile_interval,
            reconcile_rate,
            tls,
        })
    }

    /// The `tls_*` keys: only with a `rediss://` URL; files readable and parsing as PEM
    /// (certificates that make trust anchors, a private key that matches its certificate);
    /// a client certificate and its key together or not at all.
    fn tls(
        &self,
        t: &RawTarget,
        i: usize,
        base: &Path,
        info: &redis::ConnectionInfo,
        url: &str,
    ) -> Result<TargetTls, ConfigError> {
        let k = |field: &str| format!("target[{i}].{field}");
        let keys = [
            ("tls_ca_file", &t.tls_ca_file),
            ("tls_cert_file", &t.tls_cert_file),
            ("tls_key_file", &t.tls_key_file),
            ("tls_server_name", &t.tls_server_name),
        ];
        let redis::ConnectionAddr::TcpTls { host, .. } = info.addr() else {
            if let Some((key, Some(v))) = keys.iter().find(|(_, v)| v.is_some()) {
                return Err(self.err(
                    Some(&v.span()),
                    k(key),
                    format!(
                        "TLS settings need a rediss:// url, and the url is {}: write rediss://host:port/db",
                        redact_url(url)
                    ),
                ));
            }
            return Ok(TargetTls::default());
        };
        if let Some(v) = &t.tls_server_name {
            self.server_name(v, host, &k("tls_server_name"))?;
        }
        let ca = match &t.tls_ca_file {
            Some(f) => {
                let file = self.pem_file(f, base, &k("tls_ca_file"))?;
                let certs = self.certificates(f, &file, &k("tls_ca_file"))?;
                let mut roots = rustls::RootCertStore::empty();
                for (n, c) in certs.into_iter().enumerate() {
                    roots.add(c).map_err(|e| {
                        self.err(
                            Some(&f.span()),
                            k("tls_ca_file"),
                            format!(
                                "certificate {} in {} is not a usable CA certificate: {e}",
                                n + 1,
                                file.path.display()
                            ),
                        )
                    })?;
                }
                Some(file)
            }
            None => None,
        };
        let client = match (&t.tls_cert_file, &t.tls_key_file) {
            (None, None) => None,
            (Some(c), None) => {
                return Err(self.err(
                    Some(&c.span()),
                    k("tls_cert_file"),
                    "tls_key_file is missing: a client certificate needs its private key (set both or neither)",
                ));
            }
            (None, Some(key)) => {
                return Err(self.err(
                    Some(&key.span()),
                    k("tls_key_file"),
                    "tls_cert_file is missing: a client key needs its certificate (set both or neither)",
                ));
            }
            (Some(c), Some(key)) => Some(self.client_identity(c, key, base, i)?),
        };
        Ok(TargetTls { ca, client })
    }

    /// `tls_server_name` is accepted only when it names the URL's host: the Redis client
    /// verifies the certificate against the host it connects to, and its reconnecting
    /// connections cannot be pointed at one name while dialling another.
    fn server_name(&self, v: &S<String>, host: &str, key: &str) -> Result<(), ConfigError> {
        let name = v.get_ref();
        if rustls::pki_types::ServerName::try_from(name.as_str()).is_err() {
            return Err(self.err(
                Some(&v.span()),
                key,
                format!("`{name}` is not a DNS name or IP address"),
            ));
        }
        if !name.eq_ignore_ascii_case(host) {
            return Err(self.err(
                Some(&v.span()),
                key,
                format!(
                    "verifying the certificate against `{name}` while connecting to `{host}` is not supported \
                     (the Redis client checks the url's host on every reconnect): write `{name}` as the url's host and \
                     make it resolve (DNS or /etc/hosts), or give the server certificate a subjectAltName for `{host}`"
                ),
            ));
        }
        Ok(())
    }

    /// Read a PEM file named relative to the config file.
    fn pem_file(&self, f: &S<String>, base: &Path, key: &str) -> Result<PemFile, ConfigError> {
        let path = base.join(f.get_ref());
        let pem = std::fs::read(&path)
            .map_err(|e| self.err(Some(&f.span()), key, format!("cannot read {}: {e}", path.display())))?;
        Ok(PemFile { path, pem })
    }

    /// The certificates of a PEM file: at least one, every block well formed.
    fn certificates(
        &self,
        f: &S<String>,
        file: &PemFile,
        key: &str,
    ) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
        let certs = CertificateDer::pem_slice_iter(&file.pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| {
                self.err(
                    Some(&f.span()),
                    key,
                    format!("{} is not valid PEM: {}", file.path.display(), pem_problem(&e)),
                )
            })?;
        if certs.is_empty() {
            return Err(self.err(
                Some(&f.span()),
                key,
                format!(
                    "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                    file.path.display()
                ),
            ));
        }
        Ok(certs)
    }

    fn client_identity(
        &self,
        c: &S<String>,
        key: &S<String>,
        base: &Path,
        i: usize,
    ) -> Result<ClientIdentity, ConfigError> {
        let cert_key = format!("target[{i}].tls_cert_file");
        let key_key = format!("target[{i}].tls_key_file");
        let cert = self.pem_file(c, base, &cert_key)?;
        let chain = self.certificates(c, &cert, &cert_key)?;
        let key_path = base.join(key.get_ref());
        // Read as a secret from the start; no error below quotes its content.
        let text = std::fs::read(&key_path).map_err(|e| {
            self.err(
                Some(&key.span()),
                &key_key,
                format!("cannot read {}: {e}", key_path.display()),
            )
        })?;
        let text = String::from_utf8(text).map_err(|_| {
            self.err(
                Some(&key.span()),
                &key_key,
                format!("{} is not a PEM file (not text)", key_path.display()),
            )
        })?;
        let secret = Secret::new(text);
        let der = PrivateKeyDer::from_pem_slice(secret.expose().as_bytes()).map_err(|e| {
            let problem = match e {
                pem::Error::NoItemsFound => "no PEM private key in it (-----BEGIN PRIVATE KEY-----, RSA or EC)",
                _ => "its PEM is malformed",
            };
            self.err(
                Some(&key.span()),
                &key_key,
                format!("{}: {problem}", key_path.display()),
            )
        })?;
        let signing = rustls::crypto::ring::sign::any_supported_type(&der).map_err(|_| {
            self.err(
                Some(&key.span()),
                &key_key,
                format!(
                    "{}: not a usable private key (RSA, ECDSA P-256/P-384 or Ed25519)",
                    key_path.display()
                ),
            )
        })?;
        match rustls::sign::CertifiedKey::new(chain, signing).keys_match() {
            Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {}
            Err(rustls::Error::InconsistentKeys(_)) => {
                return Err(self.err(
                    Some(&key.span()),
                    &key_key,
                    format!(
                        "{} is not the private key of the certificate in {}",
                        key_path.display(),
                        cert.path.display()
                    ),
                ));
            }
            Err(e) => {
                return Err(self.err(
                    Some(&c.span()),
                    &cert_key,
                    format!("the first certificate in {} does not parse: {e}", cert.path.display()),
                ));
            }
        }
        Ok(ClientIdentity {
            cert,
            key_path,
            key: secret,
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

/// What is wrong with a PEM file of certificates, without quoting base64 content.
fn pem_problem(e: &pem::Error) -> String {
    match e {
        pem::Error::MissingSectionEnd { .. } => "a section has no END line".to_string(),
        pem::Error::IllegalSectionStart { .. } => "a BEGIN line is malformed".to_string(),
        pem::Error::Base64Decode(_) => "a section is not valid base64".to_string(),
        other => other.to_string(),
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
