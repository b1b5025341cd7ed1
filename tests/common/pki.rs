//! A private PKI made with `openssl` for each run: the CAs, server and client certificates
//! the TLS tests (Redis over TLS, HTTPS on lockwatch's own port) trust or refuse.

use std::path::Path;
use std::process::Command;

/// Run `openssl` in `dir`, or fail saying how to install it.
pub fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run openssl ({e}): install it with `sudo apt-get install openssl` (or run `make test`, which does)")
        });
    assert!(
        out.status.success(),
        "openssl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A private PKI in a temporary directory: `ca` (the server's CA, signs all but `stranger`),
/// `other-ca` (signs `stranger` only), `server` (SAN redis.test and 127.0.0.1), `named` (SAN
/// redis.test only), `expired` (as `server`, not valid after yesterday), `client`, and
/// `stranger` (a client certificate the server does not trust); each `<name>.pem` + `.key`.
pub struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    pub fn new() -> Pki {
        let dir = tempfile::Builder::new().prefix("lockwatch-pki-").tempdir().unwrap();
        let d = dir.path();
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
        for (ca, cn) in [("ca", "lockwatch test CA"), ("other-ca", "unrelated CA")] {
            let (key, pem, subj) = (format!("{ca}.key"), format!("{ca}.pem"), format!("/CN={cn}"));
            let mut args = vec!["req", "-x509"];
            args.extend(ec);
            args.extend(["-keyout", &key, "-out", &pem, "-days", "3650", "-subj", &subj]);
            args.extend(["-addext", "basicConstraints=critical,CA:TRUE"]);
            args.extend(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
            openssl(d, &args);
        }
        // (name, CN, subjectAltName, extended key usage, days valid, signed by)
        let leaves = [
            (
                "server",
                "redis.test",
                "DNS:redis.test,IP:127.0.0.1",
                "serverAuth",
                "365",
                "ca",
            ),
            ("named", "redis.test", "DNS:redis.test", "serverAuth", "365", "ca"),
            // A cluster node's: it is a client of the other nodes too (cluster bus, replication).
            (
                "node",
                "redis.test",
                "DNS:redis.test,IP:127.0.0.1",
                "serverAuth,clientAuth",
                "365",
                "ca",
            ),
            (
                "expired",
                "redis.test",
                "DNS:redis.test,IP:127.0.0.1",
                "serverAuth",
                "-1",
                "ca",
            ),
            ("client", "lockwatch", "DNS:lockwatch", "clientAuth", "365", "ca"),
            (
                "stranger",
                "lockwatch",
                "DNS:lockwatch",
                "clientAuth",
                "365",
                "other-ca",
            ),
        ];
        for (serial, (name, cn, san, usage, days, signer)) in leaves.into_iter().enumerate() {
            let ext = format!("{name}.ext");
            let extensions = format!("subjectAltName={san}\nextendedKeyUsage={usage}\nbasicConstraints=CA:FALSE\n");
            std::fs::write(d.join(&ext), extensions).unwrap();
            let (key, csr, pem) = (format!("{name}.key"), format!("{name}.csr"), format!("{name}.pem"));
            let subj = format!("/CN={cn}");
            let mut args = vec!["req", "-new"];
            args.extend(ec);
            args.extend(["-keyout", &key, "-out", &csr, "-subj", &subj]);
            openssl(d, &args);
            let (serial, ca, ca_key) = (
                (serial + 2).to_string(),
                format!("{signer}.pem"),
                format!("{signer}.key"),
            );
            let mut args = vec![
                "x509", "-req", "-in", &csr, "-out", &pem, "-extfile", &ext, "-days", days,
            ];
            args.extend(["-CA", &ca, "-CAkey", &ca_key, "-set_serial", &serial]);
            openssl(d, &args);
        }
        Pki { dir }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, file: &str) -> String {
        self.dir.path().join(file).display().to_string()
    }
}
