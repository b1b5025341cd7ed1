//! `[[target]]` TLS settings: the CA bundle to trust, the client certificate and its key,
//! each read and checked at load (PEM that parses, a key that belongs to its certificate),
//! and the server name rule. `access::tls` turns them into the connection's TLS config.

use std::fmt;
use std::path::{Path, PathBuf};

/// The refusal of a URL's `#insecure`, wherever it is written.
pub(super) const INSECURE_URL: &str = "`#insecure` in the url is not taken: set tls_insecure_skip_verify = true under the target (every connection then honours it, and lockwatch says so), or leave both out to verify the server's certificate";

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::raw::{RawTarget, S};
use super::target::redact_url;
use super::{ConfigError, Cx, Secret};

/// The TLS files of a `rediss://` target, read and parsed at load. With neither set, the
/// system's roots are trusted and no client certificate is offered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TargetTls {
    /// `tls_ca_file`: the CA bundle trusted instead of the system roots.
    pub ca: Option<PemFile>,
    /// `tls_cert_file` + `tls_key_file`: for servers with `tls-auth-clients`.
    pub client: Option<ClientIdentity>,
    /// `tls_insecure_skip_verify`: the server's certificate is not verified, on every
    /// connection (data, subscription, cluster nodes, sentinels).
    pub insecure: bool,
}

/// A PEM file as read at load. Its Debug shows the path only.
#[derive(Clone, PartialEq)]
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
#[derive(Debug, Clone, PartialEq)]
pub struct ClientIdentity {
    pub cert: PemFile,
    pub key_path: PathBuf,
    pub key: Secret,
}

impl Cx<'_> {
    /// The `tls_*` keys: only with a `rediss://` URL; files readable and parsing as PEM
    /// (certificates that make trust anchors, a private key that matches its certificate);
    /// a client certificate and its key together or not at all.
    pub(super) fn tls(
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
        let insecure = t.tls_insecure_skip_verify.as_ref();
        let redis::ConnectionAddr::TcpTls {
            host, insecure: flag, ..
        } = info.addr()
        else {
            if let Some(v) = insecure {
                return Err(self.err(
                    Some(&v.span()),
                    k("tls_insecure_skip_verify"),
                    format!("it needs a rediss:// url, and the url is {}", redact_url(url)),
                ));
            }
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
        if *flag {
            return Err(self.err(t.url.as_ref().map(|u| u.span()).as_ref(), k("url"), INSECURE_URL));
        }
        let insecure = insecure.is_some_and(|v| *v.get_ref());
        if insecure
            && let Some((key, Some(v))) = keys
                .iter()
                .find(|(key, v)| *key != "tls_cert_file" && *key != "tls_key_file" && v.is_some())
        {
            return Err(self.err(
                Some(&v.span()),
                k(key),
                "not used with tls_insecure_skip_verify = true, which verifies nothing: remove one of them",
            ));
        }
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
        Ok(TargetTls { ca, client, insecure })
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
