//! The Debian `prometheus-alertmanager` on a free loopback port (clustering off), routing
//! every alert to a webhook the test serves, which records each notification; killed on
//! drop. Fails the test with the install hint when the binary is missing.

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::routing::post;

pub struct Alertmanager {
    child: Child,
    /// `host:port`, for Prometheus's `alertmanagers` config.
    pub addr: String,
    /// Every webhook notification received, as sent.
    pub received: Arc<Mutex<Vec<serde_json::Value>>>,
    dir: tempfile::TempDir,
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Alertmanager {
    /// Start Alertmanager and the webhook; each alert is a group of its own (`group_by:
    /// ['...']`), sent after 1 s and not repeated for an hour.
    pub async fn start() -> Alertmanager {
        let bin = super::require_binary("prometheus-alertmanager", "prometheus-alertmanager");
        let received: Arc<Mutex<Vec<serde_json::Value>>> = Default::default();
        let r = received.clone();
        let app = axum::Router::new().route(
            "/hook",
            post(move |Json(v): Json<serde_json::Value>| {
                let r = r.clone();
                async move {
                    r.lock().unwrap().push(v);
                    "ok"
                }
            }),
        );
        let hook = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let hook_addr = hook.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(hook, app).await.unwrap() });
        let dir = tempfile::tempdir().unwrap();
        let port = lockwatch::access::child::free_port().unwrap();
        let config = format!(
            "route:\n  receiver: hook\n  group_by: ['...']\n  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\n\
             receivers:\n  - name: hook\n    webhook_configs:\n      - url: http://{hook_addr}/hook\n        send_resolved: true\n"
        );
        std::fs::write(dir.path().join("alertmanager.yml"), config).unwrap();
        let child = Command::new(bin)
            .arg(format!(
                "--config.file={}",
                dir.path().join("alertmanager.yml").display()
            ))
            .arg(format!("--storage.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--cluster.listen-address=")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("alertmanager.log")).unwrap())
            .spawn()
            .unwrap();
        Alertmanager {
            child,
            addr: format!("127.0.0.1:{port}"),
            received,
            dir,
        }
    }

    /// Its log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("alertmanager.log")).unwrap_or_default()
    }

    /// Each alert of every notification so far: (status, labels), in order received.
    pub fn alerts(&self) -> Vec<(String, serde_json::Value)> {
        let received = self.received.lock().unwrap();
        received
            .iter()
            .flat_map(|n| n["alerts"].as_array().cloned().unwrap_or_default())
            .map(|a| (a["status"].as_str().unwrap_or("").to_string(), a["labels"].clone()))
            .collect()
    }
}
