//! `tls_server_config` of the web config file: the server certificate and key (`web_cert`),
//! the client CA and the toolkit's client auth types, the TLS versions — read, checked and
//! turned into the rustls server config the HTTP listener uses. Refused, with a sentence saying so: what
//! rustls cannot do (TLS 1.0/1.1) and what lockwatch does not implement (cipher and curve
//! lists, `client_allowed_sans`).

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};

use super::web::{RawTls, WebError};
use super::web_cert::{CertSource, Pem, certificates};

/// The toolkit's `client_auth_type` values (Go's `tls.ClientAuthType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    NoClientCert,
    /// Ask for a certificate; neither require nor verify it.
    RequestClientCert,
    /// Require a certificate; do not verify it.
    RequireAnyClientCert,
    /// Verify a certificate against the client CA when one is sent.
    VerifyClientCertIfGiven,
    /// Require a certificate signed by the client CA.
    RequireAndVerifyClientCert,
}

impl fmt::Display for ClientAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl ClientAuth {
    fn parse(s: &str) -> Option<ClientAuth> {
        Some(match s {
            "" | "NoClientCert" => ClientAuth::NoClientCert,
            "RequestClientCert" => ClientAuth::RequestClientCert,
            // The toolkit keeps the old name as an alias.
            "RequireAnyClientCert" | "RequireClientCert" => ClientAuth::RequireAnyClientCert,
            "VerifyClientCertIfGiven" => ClientAuth::VerifyClientCertIfGiven,
            "RequireAndVerifyClientCert" => ClientAuth::RequireAndVerifyClientCert,
            _ => return None,
        })
    }

    fn verifies(self) -> bool {
        matches!(
            self,
            ClientAuth::VerifyClientCertIfGiven | ClientAuth::RequireAndVerifyClientCert
        )
    }
}

/// TLS is on when any of its keys is set (the toolkit's rule); a half-written section is
/// then an error rather than plain HTTP.
pub(super) fn enabled(t: &RawTls) -> bool {
    [
        &t.cert,
        &t.key,
        &t.client_ca,
        &t.cert_file,
        &t.key_file,
        &t.client_ca_file,
        &t.client_auth_type,
    ]
    .iter()
    .any(|v| v.is_some())
}

/// What the section's files hold, parsed.
pub(super) struct TlsFiles {
    cert: CertSource,
    client_roots: Option<RootCertStore>,
}

const K: &str = "tls_server_config";

impl TlsFiles {
    pub(super) fn read(
        t: &RawTls,
        base: &Path,
        provider: &Arc<CryptoProvider>,
    ) -> Result<(TlsFiles, ClientAuth), WebError> {
        let cert = inline_or_file(&t.cert, &t.cert_file, "cert", base)?
            .ok_or_else(|| WebError::new(format!("{K}.cert_file"), "missing: TLS needs cert_file and key_file"))?;
        let key = inline_or_file(&t.key, &t.key_file, "key", base)?
            .ok_or_else(|| WebError::new(format!("{K}.key_file"), "missing: TLS needs cert_file and key_file"))?;
        let cert = CertSource::new(&cert, &key, provider.clone())?;
        let auth_text = t.client_auth_type.as_deref().unwrap_or("");
        let auth = ClientAuth::parse(auth_text).ok_or_else(|| {
            WebError::new(
                format!("{K}.client_auth_type"),
                format!(
                    "`{auth_text}` is not a client auth type: write NoClientCert, RequestClientCert, \
                     RequireAnyClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert"
                ),
            )
        })?;
        let ca = inline_or_file(&t.client_ca, &t.client_ca_file, "client_ca", base)?;
        let client_roots = match (&ca, auth) {
            (Some(_), ClientAuth::NoClientCert) => {
                return Err(WebError::new(
                    format!("{K}.client_auth_type"),
                    "a client CA is configured without a client auth type: set client_auth_type to RequireAndVerifyClientCert",
                ));
            }
            (None, a) if a.verifies() => {
                return Err(WebError::new(
                    format!("{K}.client_ca_file"),
                    format!("missing: {a} verifies client certificates against it"),
                ));
            }
            (Some(pem), _) => {
                let mut roots = RootCertStore::empty();
                for (n, c) in certificates(pem)?.into_iter().enumerate() {
                    roots.add(c).map_err(|e| {
                        WebError::new(
                            &pem.key,
                            format!("certificate {} is not a usable CA certificate: {e}", n + 1),
                        )
                    })?;
                }
                Some(roots)
            }
            (None, _) => None,
        };
        let files = TlsFiles { cert, client_roots };
        Ok((files, auth))
    }
}

/// An inline PEM (`cert`) or a file (`cert_file`, relative to the web config). Both at
/// once is an error.
fn inline_or_file(
    inline: &Option<String>,
    file: &Option<String>,
    name: &str,
    base: &Path,
) -> Result<Option<Pem>, WebError> {
    match (inline, file) {
        (Some(_), Some(_)) => Err(WebError::new(
            format!("{K}.{name}"),
            format!("set {name} or {name}_file, not both"),
        )),
        (Some(pem), None) => Ok(Some(Pem {
            key: format!("{K}.{name}"),
            bytes: pem.clone().into_bytes(),
            path: None,
        })),
        (None, Some(f)) => {
            let key = format!("{K}.{name}_file");
            let path = base.join(f);
            let bytes = std::fs::read(&path)
                .map_err(|e| WebError::new(&key, format!("cannot read {}: {e}", path.display())))?;
            Ok(Some(Pem {
                key,
                bytes,
                path: Some(path),
            }))
        }
        (None, None) => Ok(None),
    }
}

/// The TLS versions from `min_version` / `max_version` (default TLS 1.2 to 1.3).
fn versions(t: &RawTls) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, WebError> {
    let level = |v: &Option<String>, name: &str, default: u8| -> Result<u8, WebError> {
        match v.as_deref() {
            None => Ok(default),
            Some("TLS12") => Ok(12),
            Some("TLS13") => Ok(13),
            Some(other) => Err(WebError::new(
                format!("{K}.{name}"),
                format!("`{other}` is not supported: write TLS12 or TLS13 (TLS 1.0 and 1.1 are not offered)"),
            )),
        }
    };
    let (min, max) = (
        level(&t.min_version, "min_version", 12)?,
        level(&t.max_version, "max_version", 13)?,
    );
    if min > max {
        return Err(WebError::new(
            format!("{K}.min_version"),
            "is above max_version: no TLS version is left",
        ));
    }
    Ok([(12, &rustls::version::TLS12), (13, &rustls::version::TLS13)]
        .into_iter()
        .filter(|(v, _)| (min..=max).contains(v))
        .map(|(_, p)| p)
        .collect())
}

/// The rustls server config: versions, client verification per `client_auth`, the
/// certificate (its key checked against it), HTTP/1.1 by ALPN.
pub(super) fn server_config(
    t: &RawTls,
    files: TlsFiles,
    auth: ClientAuth,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<rustls::ServerConfig>, WebError> {
    for (name, set) in [
        ("cipher_suites", t.cipher_suites.is_some()),
        ("curve_preferences", t.curve_preferences.is_some()),
        ("client_allowed_sans", t.client_allowed_sans.is_some()),
    ] {
        if set {
            return Err(WebError::new(
                format!("{K}.{name}"),
                "not supported by lockwatch: remove it (rustls' default suites and curves are used; restrict clients with client_ca_file)",
            ));
        }
    }
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions(t)?)
        .map_err(|e| WebError::new(format!("{K}.min_version"), e.to_string()))?;
    let builder = match (auth, files.client_roots) {
        (ClientAuth::NoClientCert, _) => builder.with_no_client_auth(),
        (ClientAuth::RequestClientCert | ClientAuth::RequireAnyClientCert, _) => {
            builder.with_client_cert_verifier(Arc::new(AnyClientCert::new(&provider, auth)))
        }
        (_, roots) => {
            let roots = Arc::new(roots.unwrap_or_else(RootCertStore::empty));
            let mut verifier = WebPkiClientVerifier::builder_with_provider(roots, provider.clone());
            if auth == ClientAuth::VerifyClientCertIfGiven {
                verifier = verifier.allow_unauthenticated();
            }
            let verifier = verifier
                .build()
                .map_err(|e| WebError::new(format!("{K}.client_ca_file"), format!("cannot be used: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_cert_resolver(Arc::new(files.cert));
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.ignore_client_order = t.prefer_server_cipher_suites.unwrap_or(true);
    Ok(Arc::new(config))
}

/// `RequestClientCert` and `RequireAnyClientCert`: any certificate is taken (the client only
/// has to prove it holds the key), as Go does. The toolkit calls these insecure, and so do we.
#[derive(Debug)]
struct AnyClientCert {
    mandatory: bool,
    algorithms: WebPkiSupportedAlgorithms,
}

impl AnyClientCert {
    fn new(provider: &CryptoProvider, auth: ClientAuth) -> AnyClientCert {
        AnyClientCert {
            mandatory: auth == ClientAuth::RequireAnyClientCert,
            algorithms: provider.signature_verification_algorithms,
        }
    }
}

impl ClientCertVerifier for AnyClientCert {
    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
