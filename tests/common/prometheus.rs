//! The Debian `prometheus` server on a free loopback port, with a config the test writes;
//! killed on drop. Fails the test with the install hint when the binary is missing.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Prometheus {
    child: Child,
    pub url: String,
    dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// Start Prometheus with `config` (prometheus.yml) written in its own directory, where
    /// the files named by `files` (name, content) are written too.
    pub fn start(config: &str, files: &[(&str, &[u8])]) -> Prometheus {
        Prometheus::start_with(config, files, &[])
    }

    /// [`Prometheus::start`] with more command-line flags (`--enable-feature=…`).
    pub fn start_with(config: &str, files: &[(&str, &[u8])], flags: &[&str]) -> Prometheus {
        let bin = super::require_binary("prometheus", "prometheus");
        let dir = tempfile::tempdir().unwrap();
        for (name, content) in files {
            std::fs::write(dir.path().join(name), content).unwrap();
        }
        let port = lockwatch::access::child::free_port().unwrap();
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let child = Command::new(bin)
            .arg(format!("--config.file={}", dir.path().join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .args(flags)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
            .spawn()
            .unwrap();
        Prometheus {
            child,
            url: format!("http://127.0.0.1:{port}"),
            dir,
        }
    }

    /// The directory holding its config and the files written with it.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `GET {url}{path}` as JSON; `None` while Prometheus is not answering.
    pub async fn json(&self, path: &str, query: &[(&str, &str)]) -> Option<serde_json::Value> {
        let resp = reqwest::Client::new()
            .get(format!("{}{path}", self.url))
            .query(query)
            .send()
            .await
            .ok()?;
        resp.json().await.ok()
    }

    /// Poll `/api/v1/targets` until every active target was scraped at least once; the
    /// targets by job name. Fails after `limit` with Prometheus's log.
    pub async fn scraped_targets(
        &self,
        jobs: usize,
        limit: Duration,
    ) -> std::collections::BTreeMap<String, serde_json::Value> {
        let started = Instant::now();
        loop {
            if let Some(v) = self.json("/api/v1/targets", &[]).await {
                let targets: std::collections::BTreeMap<String, serde_json::Value> = v["data"]["activeTargets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|t| t["health"] != "unknown")
                    .map(|t| (t["labels"]["job"].as_str().unwrap_or("").to_string(), t.clone()))
                    .collect();
                if targets.len() == jobs {
                    return targets;
                }
            }
            if started.elapsed() > limit {
                let log = std::fs::read_to_string(self.dir().join("prometheus.log")).unwrap_or_default();
                panic!("Prometheus did not scrape {jobs} targets within {limit:?}; its log:\n{log}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Prometheus scraping `targets` every second (job `lockwatch`), evaluating the shipped
    /// rule files (`alerts/`) every second.
    pub fn with_shipped_rules(targets: &[String]) -> Prometheus {
        let alerts = Path::new(env!("CARGO_MANIFEST_DIR")).join("alerts");
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        Prometheus::start(
            &format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 rule_files:\n  - {}\n  - {}\n\
                 scrape_configs:\n  - job_name: lockwatch\n    static_configs:\n      - targets: [{}]\n",
                alerts.join("lockwatch-recording.rules.yml").display(),
                alerts.join("lockwatch-alerts.rules.yml").display(),
                targets.join(", "),
            ),
            &[],
        )
    }

    /// Wait until `alert` fires with every label of `labels`: the firing alerts of that name.
    /// Fails after `limit` with the alerts Prometheus has and its log.
    pub async fn wait_firing(&self, alert: &str, labels: &[(&str, &str)], limit: Duration) -> Vec<serde_json::Value> {
        let started = Instant::now();
        loop {
            let all = self.json("/api/v1/alerts", &[]).await;
            let firing: Vec<serde_json::Value> = all
                .as_ref()
                .and_then(|v| v["data"]["alerts"].as_array())
                .into_iter()
                .flatten()
                .filter(|a| a["labels"]["alertname"] == alert && a["state"] == "firing")
                .filter(|a| labels.iter().all(|(k, v)| a["labels"][*k] == *v))
                .cloned()
                .collect();
            if !firing.is_empty() {
                return firing;
            }
            assert!(
                started.elapsed() < limit,
                "{alert} {labels:?} never fired: {all:?}\n{}",
                std::fs::read_to_string(self.dir().join("prometheus.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}
