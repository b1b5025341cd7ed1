//! The topology follower's families: nodes per role, each node's health (one series per
//! node of the current topology; a node that leaves it loses its series), failovers seen,
//! and which server the target is (`lockwatch_target_info`: one series per server and
//! version among its primaries, the old ones dropped when they change), and whether its
//! certificates go unverified (`lockwatch_target_tls_unverified`).

use prometheus::core::Collector;
use prometheus::{IntCounter, IntCounterVec, IntGaugeVec};

use crate::access::server::Server;
use crate::config::Config;
use crate::metrics::Registry;
use crate::vocab::metric;

#[derive(Clone)]
pub struct TopologyMetrics {
    nodes: IntGaugeVec,
    node_up: IntGaugeVec,
    failovers_total: IntCounterVec,
    target_info: IntGaugeVec,
    tls_unverified: IntGaugeVec,
}

/// One target's handles.
pub(super) struct Handles {
    target: String,
    nodes: IntGaugeVec,
    node_up: IntGaugeVec,
    /// Nodes with a `node_up` series now.
    shown: Vec<String>,
    pub(super) failovers: IntCounter,
    target_info: IntGaugeVec,
    /// The target's `mode` label.
    mode: &'static str,
    /// (server, version) with a `target_info` series now.
    servers_shown: Vec<(String, String)>,
}

/// The label values of a target that has not said which server it is.
const UNKNOWN: (&str, &str) = ("unknown", "unknown");

impl TopologyMetrics {
    /// Register the families, every target's `failovers_total` and `nodes` at 0.
    pub fn register(r: &Registry, config: &Config) -> Result<Self, prometheus::Error> {
        let m = TopologyMetrics {
            nodes: r.int_gauges(
                metric::NODES,
                "Nodes of the target's topology, by role (standalone: the one server).",
                &["target", "role"],
            )?,
            node_up: r.int_gauges(
                metric::NODE_UP,
                "1 when the node answered the last check (every second); one series per node of the topology.",
                &["target", "node"],
            )?,
            failovers_total: r.counters(
                metric::FAILOVERS_TOTAL,
                "Primary changes seen: a Sentinel switch, or a cluster replica taking over its primary's slots.",
                &["target"],
            )?,
            target_info: r.int_gauges(
                metric::TARGET_INFO,
                "1 for each server and version among the target's primaries (INFO server: redis or valkey; unknown until told), with the config's mode.",
                &["target", "server", "version", "mode"],
            )?,
            tls_unverified: r.int_gauges(
                metric::TARGET_TLS_UNVERIFIED,
                "1 when the target's server certificates are not verified (tls_insecure_skip_verify = true), on every connection; else 0.",
                &["target"],
            )?,
        };
        for t in &config.targets {
            m.tls_unverified(&t.name, t.tls.insecure);
            let mode = t.topology.mode().as_str();
            m.target_info
                .with_label_values(&[t.name.as_str(), UNKNOWN.0, UNKNOWN.1, mode])
                .set(1);
            m.failovers_total.with_label_values(&[&t.name]);
            for role in ["primary", "replica"] {
                m.nodes.with_label_values(&[&t.name, role]);
            }
        }
        Ok(m)
    }

    /// Whether the target's certificates go unverified, set again when a follower starts
    /// (a reload may turn it on or off).
    pub(super) fn tls_unverified(&self, target: &str, insecure: bool) {
        self.tls_unverified
            .with_label_values(&[target])
            .set(i64::from(insecure));
    }

    pub(super) fn for_target(&self, target: &str, mode: &'static str) -> Handles {
        Handles {
            target: target.to_string(),
            nodes: self.nodes.clone(),
            node_up: self.node_up.clone(),
            shown: Vec::new(),
            failovers: self.failovers_total.with_label_values(&[target]),
            target_info: self.target_info.clone(),
            mode,
            servers_shown: Vec::new(),
        }
    }
}

impl Handles {
    pub(super) fn nodes(&self, primaries: usize, replicas: usize) {
        let t = self.target.as_str();
        self.nodes.with_label_values(&[t, "primary"]).set(primaries as i64);
        self.nodes.with_label_values(&[t, "replica"]).set(replicas as i64);
    }

    /// Each node's health; series of nodes no longer in the topology are removed.
    pub(super) fn node_up<'a>(&mut self, answers: impl Iterator<Item = (&'a str, bool)>) {
        let t = self.target.clone();
        let mut now = Vec::new();
        for (node, up) in answers {
            self.node_up.with_label_values(&[t.as_str(), node]).set(i64::from(up));
            now.push(node.to_string());
        }
        for gone in self.shown.iter().filter(|n| !now.contains(n)) {
            let _ = self.node_up.remove_label_values(&[t.as_str(), gone.as_str()]);
        }
        self.shown = now;
    }

    /// A follower starting (its predecessor of a reload stopped): the target's
    /// `target_info` series, whatever their mode, back to one saying `unknown`.
    pub(super) fn start(&mut self) {
        let t = self.target.clone();
        for mf in self.target_info.collect() {
            for m in mf.get_metric() {
                let label = |name: &str| {
                    m.get_label()
                        .iter()
                        .find(|p| p.name() == name)
                        .map(|p| p.value().to_string())
                        .unwrap_or_default()
                };
                if label("target") == t {
                    let values = [t.clone(), label("server"), label("version"), label("mode")];
                    let _ = self
                        .target_info
                        .remove_label_values(&values.each_ref().map(String::as_str));
                }
            }
        }
        self.servers_shown.clear();
        self.servers(&[]);
    }

    /// Which servers the target's primaries are (none known: `unknown`); series of servers
    /// and versions no longer among them are removed.
    pub(super) fn servers(&mut self, servers: &[Server]) {
        let mut now: Vec<(String, String)> = servers
            .iter()
            .map(|s| (s.family.as_str().to_string(), s.version.clone()))
            .collect();
        if now.is_empty() {
            now.push((UNKNOWN.0.to_string(), UNKNOWN.1.to_string()));
        }
        now.sort();
        now.dedup();
        let t = self.target.as_str();
        for (server, version) in &now {
            self.target_info
                .with_label_values(&[t, server, version, self.mode])
                .set(1);
        }
        for (server, version) in self.servers_shown.iter().filter(|s| !now.contains(s)) {
            let _ = self.target_info.remove_label_values(&[t, server, version, self.mode]);
        }
        self.servers_shown = now;
    }
}
