//! TLS for `rediss://` targets: the client built with the target's own CA and client
//! certificate (read and checked by `config`), the process's rustls crypto provider, and
//! [`explain`], which turns a failed handshake into one sentence naming the cause and the
//! setting to look at. Connections themselves are `connect`'s.

use std::sync::Once;

use crate::config::{TargetConfig, TargetTls};

/// A client for `info` (the target's own server, one of its nodes, or a sentinel): with
/// the target's `tls_ca_file` and client certificate when it has them and `info` is TLS.
pub(crate) fn client(info: &redis::ConnectionInfo, tls: &TargetTls) -> redis::RedisResult<redis::Client> {
    install_provider();
    match certificates(tls) {
        Some(certs) if matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. }) => {
            redis::Client::build_with_tls(info.clone(), certs)
        }
        _ => redis::Client::open(info.clone()),
    }
}

/// The target's CA and client certificate in the form the redis crate takes them.
pub(crate) fn certificates(tls: &TargetTls) -> Option<redis::TlsCertificates> {
    install_provider();
    if tls.ca.is_none() && tls.client.is_none() {
        return None;
    }
    Some(redis::TlsCertificates {
        client_tls: tls.client.as_ref().map(|c| redis::ClientTlsConfig {
            client_cert: c.cert.pem.clone(),
            client_key: c.key.expose().as_bytes().to_vec(),
        }),
        root_cert: tls.ca.as_ref().map(|ca| ca.pem.clone()),
    })
}

/// The subscription reader's verifier under `tls_insecure_skip_verify`: any server
/// certificate is taken (neither its chain nor its name is checked), as the data
/// connections (the redis crate's insecure mode) take it. The handshake's signatures are
/// still checked here — a server that cannot sign with its certificate's key fails every
/// TLS client anyway — while the redis crate checks none.
pub(crate) fn unverified() -> std::sync::Arc<dyn rustls::client::danger::ServerCertVerifier> {
    install_provider();
    std::sync::Arc::new(Unverified(rustls::crypto::ring::default_provider()))
}

#[derive(Debug)]
struct Unverified(rustls::crypto::CryptoProvider);

impl rustls::client::danger::ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// rustls needs one crypto provider per process. With only its `ring` feature on, it would
/// pick ring by itself; installing it here keeps that true should another dependency ever
/// turn on a second provider (rustls then panics instead of choosing).
pub(crate) fn install_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // An error means a provider is already installed: that one is used.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// `e` as the operator should read it: a TLS failure becomes one sentence starting with
/// `TLS:` that names the cause and the file or setting involved, a cluster's refusal of the
/// target's database one that says which servers serve it (`connect::database_refused`);
/// anything else is `e` as is. The caller names the target.
pub fn explain(t: &TargetConfig, e: &redis::RedisError) -> String {
    let text = e.to_string();
    if let Some(sentence) = super::connect::database_refused(t, &text) {
        return sentence;
    }
    let redis::ConnectionAddr::TcpTls { host, .. } = t.connection.addr() else {
        return text;
    };
    if text.starts_with("TLS: ") {
        return text; // explained already (`connect::once`)
    }
    explain_text(t, host, &text).unwrap_or(text)
}

/// `e` with [`explain`]'s sentence as its message when it is a TLS failure (still an I/O
/// error), so one-off users (inspect, the drill, pre-flights) print the sentence as is.
pub(crate) fn explained(t: &TargetConfig, e: redis::RedisError) -> redis::RedisError {
    let sentence = explain(t, &e);
    if sentence.starts_with("TLS: ") && sentence != e.to_string() {
        std::io::Error::new(std::io::ErrorKind::InvalidData, sentence).into()
    } else {
        e
    }
}

/// The sentence for a rustls error's text (the redis crate hands it on as an I/O error's
/// message, so its text is what is left of it), or `None` when it is not a TLS failure.
fn explain_text(t: &TargetConfig, host: &str, text: &str) -> Option<String> {
    let ca = t.tls.ca.as_ref().map(|c| c.path.display().to_string());
    let cert = t.tls.client.as_ref().map(|c| c.cert.path.display().to_string());
    if let Some(detail) = after(text, "invalid peer certificate: ") {
        let has = |s: &str| detail.starts_with(s);
        return Some(if has("UnknownIssuer") {
            match &ca {
                Some(path) => {
                    format!("TLS: the server's certificate is not signed by a CA in tls_ca_file ({path}): {detail}")
                }
                None => format!(
                    "TLS: the server's certificate is not signed by a CA the system trusts (set tls_ca_file to your CA bundle): {detail}"
                ),
            }
        } else if has("certificate expired") || has("Expired") {
            format!("TLS: the server's certificate has expired: {detail}")
        } else if has("certificate not valid yet") || has("NotValidYet") {
            format!("TLS: the server's certificate is not valid yet (are the clocks right?): {detail}")
        } else if has("certificate not valid for name") || has("NotValidForName") {
            format!("TLS: the server's certificate is not valid for the url's host `{host}`: {detail}")
        } else if has("Revoked") {
            format!("TLS: the server's certificate has been revoked: {detail}")
        } else if has("certificate does not allow extended key usage") || has("InvalidPurpose") {
            format!("TLS: the server's certificate is not made for a server (extended key usage): {detail}")
        } else {
            format!("TLS: the server's certificate was refused: {detail}")
        });
    }
    if let Some(alert) = after(text, "received fatal alert: ") {
        let refused_client_cert = [
            "UnknownCA",
            "BadCertificate",
            "CertificateUnknown",
            "CertificateExpired",
            "CertificateRevoked",
            "UnsupportedCertificate",
            "AccessDenied",
        ];
        return Some(match (&cert, alert) {
            (None, "CertificateRequired") => format!(
                "TLS: the server requires a client certificate: set tls_cert_file and tls_key_file (received fatal alert: {alert})"
            ),
            (None, "HandshakeFailure") => format!(
                "TLS: the server refused the handshake, and no client certificate was offered: \
                 does it require one (tls_cert_file, tls_key_file)? (received fatal alert: {alert})"
            ),
            (Some(path), a) if a == "CertificateRequired" || refused_client_cert.contains(&a) => {
                format!(
                    "TLS: the server refused the client certificate in tls_cert_file ({path}): received fatal alert: {alert}"
                )
            }
            _ => format!("TLS: the server ended the handshake: received fatal alert: {alert}"),
        });
    }
    if text.contains("received corrupt message") || text.contains("InvalidContentType") {
        return Some(format!(
            "TLS: the server did not answer in TLS (a plain port behind a rediss:// url?): {text}"
        ));
    }
    if text.starts_with("peer is incompatible") || text.starts_with("peer misbehaved") {
        return Some(format!("TLS: {text}"));
    }
    None
}

/// What follows `marker` in `text`, up to the end of that message.
fn after<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    text.find(marker).map(|at| text[at + marker.len()..].trim())
}
