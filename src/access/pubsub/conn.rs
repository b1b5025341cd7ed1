//! The socket of a subscription: TCP, TLS (tokio-rustls with the target's `tls_ca_file`,
//! else the system's roots, and its client certificate, as the `redis` crate's clients
//! have them) or a unix socket, then `HELLO 3` or `AUTH` with the target's credentials.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::frame::{self, Frame};
use super::{MAX_FRAME, Messages, PubSubError, READ_SIZE, Sink};
use crate::config::TargetTls;

/// A connected stream of any kind.
pub(super) trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}
pub(super) type Io = Box<dyn Stream>;

/// A subscription connection to `info`'s server (subscribed to nothing yet), within
/// `timeout` for connecting and the handshake. Call inside a tokio runtime.
pub async fn connect(
    info: &redis::ConnectionInfo,
    tls: &TargetTls,
    timeout: Duration,
) -> Result<(Sink, Messages), PubSubError> {
    let (io, buf) = tokio::time::timeout(timeout, open(info, tls))
        .await
        .map_err(|_| PubSubError::Timeout)??;
    Ok(super::start(io, buf))
}

async fn open(info: &redis::ConnectionInfo, tls: &TargetTls) -> Result<(Io, BytesMut), PubSubError> {
    let mut io: Io = match info.addr() {
        redis::ConnectionAddr::Tcp(host, port) => Box::new(tcp(host, *port).await?),
        redis::ConnectionAddr::TcpTls {
            host, port, insecure, ..
        } => {
            let config = client_config(tls, *insecure || tls.insecure)?;
            let name = ServerName::try_from(host.clone()).map_err(|e| PubSubError::Tls(e.to_string()))?;
            let stream = tcp(host, *port).await?;
            let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
                .connect(name, stream)
                .await
                .map_err(|e| PubSubError::Tls(e.to_string()))?;
            Box::new(tls)
        }
        #[cfg(unix)]
        redis::ConnectionAddr::Unix(path) => Box::new(tokio::net::UnixStream::connect(path).await?),
        #[allow(unreachable_patterns)]
        _ => return Err(PubSubError::Tls("an address kind lockwatch cannot subscribe on".into())),
    };
    let mut buf = BytesMut::with_capacity(READ_SIZE);
    let settings = info.redis_settings();
    let password = settings.password();
    let user = settings.username();
    if settings.protocol() == redis::ProtocolVersion::RESP3 {
        let mut args: Vec<&[u8]> = vec![b"HELLO", b"3"];
        if let Some(p) = password {
            args.extend([&b"AUTH"[..], user.unwrap_or("default").as_bytes(), p.as_bytes()]);
        }
        hello(&mut io, &mut buf, &command(&args), "HELLO").await?;
    } else if let Some(p) = password {
        let args: Vec<&[u8]> = match user {
            Some(u) => vec![b"AUTH", u.as_bytes(), p.as_bytes()],
            None => vec![b"AUTH", p.as_bytes()],
        };
        hello(&mut io, &mut buf, &command(&args), "AUTH").await?;
    }
    Ok((io, buf))
}

async fn tcp(host: &str, port: u16) -> Result<tokio::net::TcpStream, PubSubError> {
    let stream = tokio::net::TcpStream::connect((host, port)).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Send `cmd` and read its one reply: an error reply is a refusal.
async fn hello(io: &mut Io, buf: &mut BytesMut, cmd: &[u8], name: &'static str) -> Result<(), PubSubError> {
    io.write_all(cmd).await?;
    io.flush().await?;
    loop {
        if let Some((f, n)) = frame::parse(buf)? {
            let refused = match f {
                Frame::Error(text) => Some(super::refusal(text)),
                _ => None,
            };
            let _ = buf.split_to(n);
            return match refused {
                Some(text) => Err(PubSubError::Refused(format!("{name}: {text}"))),
                None => Ok(()),
            };
        }
        if buf.len() > MAX_FRAME {
            return Err(PubSubError::TooLarge);
        }
        buf.reserve(READ_SIZE);
        if io.read_buf(buf).await? == 0 {
            return Err(PubSubError::Closed);
        }
    }
}

/// A command as RESP: an array of bulk strings.
pub(super) fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// The rustls client of a target: its CA (else the system's roots) and client certificate.
/// The subscription's TLS config: the target's CA (else the system's) and client
/// certificate; with `insecure` (`tls_insecure_skip_verify`), no check of the server's
/// certificate, as the data connections.
fn client_config(tls: &TargetTls, insecure: bool) -> Result<rustls::ClientConfig, PubSubError> {
    let bad = |what: &str, e: &dyn std::fmt::Display| PubSubError::Tls(format!("{what}: {e}"));
    let mut roots = rustls::RootCertStore::empty();
    match &tls.ca {
        _ if insecure => {}
        Some(ca) => {
            for cert in CertificateDer::pem_slice_iter(&ca.pem) {
                let cert = cert.map_err(|e| bad("tls_ca_file", &e))?;
                roots.add(cert).map_err(|e| bad("tls_ca_file", &e))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            if let Some(e) = found.errors.first()
                && found.certs.is_empty()
            {
                return Err(bad("the system's CA certificates", e));
            }
            for cert in found.certs {
                let _ = roots.add(cert);
            }
        }
    }
    crate::access::tls::install_provider();
    let builder = match insecure {
        true => rustls::ClientConfig::builder()
            .dangerous()
            .with_custom_certificate_verifier(crate::access::tls::unverified()),
        false => rustls::ClientConfig::builder().with_root_certificates(roots),
    };
    let mut config = match &tls.client {
        Some(id) => {
            let chain = CertificateDer::pem_slice_iter(&id.cert.pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| bad("tls_cert_file", &e))?;
            let key = PrivateKeyDer::from_pem_slice(id.key.expose().as_bytes()).map_err(|e| bad("tls_key_file", &e))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| bad("the client certificate", &e))?
        }
        None => builder.with_no_client_auth(),
    };
    // As the data connections (the redis crate's insecure mode) do: no server name sent, so
    // both reach the same server behind a proxy that routes by it.
    config.enable_sni = !insecure;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_arrays_of_bulk_strings() {
        assert_eq!(
            command(&[b"PSUBSCRIBE", b"__keyspace@0__:a*"]),
            b"*2\r\n$10\r\nPSUBSCRIBE\r\n$17\r\n__keyspace@0__:a*\r\n"
        );
        assert_eq!(command(&[b"PING"]), b"*1\r\n$4\r\nPING\r\n");
    }
}
