//! The HTTPS server certificate of the web config: the chain and its key read and checked
//! together, and — when they come from files — read again after the files change, so a
//! renewed certificate is served without a restart, as the exporter-toolkit does. The files
//! are looked at, at a handshake, at most once a second; a pair that does not load (a key
//! written before its certificate) leaves the previous one in service, with a warning.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::web::WebError;

/// How often the files' modification times are looked at, at most.
const RECHECK: Duration = Duration::from_secs(1);

/// A PEM text of the web config: the key it was given by (for messages), its bytes, and
/// its file when it came from one.
pub(super) struct Pem {
    pub key: String,
    pub bytes: Vec<u8>,
    pub path: Option<PathBuf>,
}

/// The certificates of a PEM text: at least one, every block well formed.
pub(super) fn certificates(pem: &Pem) -> Result<Vec<CertificateDer<'static>>, WebError> {
    let certs = CertificateDer::pem_slice_iter(&pem.bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| WebError::new(&pem.key, "is not valid PEM (a section is malformed)"))?;
    if certs.is_empty() {
        return Err(WebError::new(
            &pem.key,
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
        ));
    }
    Ok(certs)
}

/// The chain of `cert` with the private key of `key`, which must belong to it.
pub(super) fn certified_key(cert: &Pem, key: &Pem, provider: &CryptoProvider) -> Result<CertifiedKey, WebError> {
    let chain = certificates(cert)?;
    let der = PrivateKeyDer::from_pem_slice(&key.bytes).map_err(|_| {
        WebError::new(
            &key.key,
            "holds no usable PEM private key (-----BEGIN PRIVATE KEY-----, RSA or EC)",
        )
    })?;
    CertifiedKey::from_der(chain, der, provider).map_err(|e| {
        WebError::new(
            &key.key,
            format!("is not the private key of the certificate, or not a usable key: {e}"),
        )
    })
}

/// The certificate handed to rustls at each handshake.
#[derive(Debug)]
pub(super) struct CertSource {
    /// cert_file and key_file, when both are files (inline PEM never changes).
    files: Option<(PathBuf, PathBuf)>,
    provider: Arc<CryptoProvider>,
    state: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    key: Arc<CertifiedKey>,
    /// The files' modification times when last looked at.
    stamp: Option<(SystemTime, SystemTime)>,
    checked: Instant,
}

impl CertSource {
    pub(super) fn new(cert: &Pem, key: &Pem, provider: Arc<CryptoProvider>) -> Result<CertSource, WebError> {
        let loaded = certified_key(cert, key, &provider)?;
        let files = cert.path.clone().zip(key.path.clone());
        let stamp = files.as_ref().and_then(|(c, k)| stamp(c, k));
        Ok(CertSource {
            files,
            provider,
            state: Mutex::new(Loaded {
                key: Arc::new(loaded),
                stamp,
                checked: Instant::now(),
            }),
        })
    }

    /// Read the files again if they changed since they were last looked at.
    fn refresh(&self, loaded: &mut Loaded) {
        let Some((cert, key)) = &self.files else { return };
        if loaded.checked.elapsed() < RECHECK {
            return;
        }
        loaded.checked = Instant::now();
        let now = stamp(cert, key);
        if now.is_none() || now == loaded.stamp {
            return;
        }
        loaded.stamp = now;
        let read = |path: &PathBuf, name: &str| -> Result<Pem, WebError> {
            let bytes = std::fs::read(path).map_err(|e| WebError::new(name, e.to_string()))?;
            Ok(Pem {
                key: name.to_string(),
                bytes,
                path: Some(path.clone()),
            })
        };
        let pair = read(cert, "cert_file")
            .and_then(|c| Ok((c, read(key, "key_file")?)))
            .and_then(|(c, k)| certified_key(&c, &k, &self.provider));
        match pair {
            Ok(new) => {
                loaded.key = Arc::new(new);
                tracing::info!(cert_file = %cert.display(), "TLS certificate reloaded");
            }
            Err(e) => tracing::warn!(cert_file = %cert.display(), key = %e.key, error = %e.message,
                "TLS certificate changed but does not load; serving the previous one"),
        }
    }
}

impl ResolvesServerCert for CertSource {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let mut loaded = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        self.refresh(&mut loaded);
        Some(loaded.key.clone())
    }
}

fn stamp(cert: &PathBuf, key: &PathBuf) -> Option<(SystemTime, SystemTime)> {
    let modified = |p: &PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    Some((modified(cert)?, modified(key)?))
}
