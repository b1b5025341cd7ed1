//! The topology follower's families: nodes per role, each node's health (one series per
//! node of the current topology; a node that leaves it loses its series), failovers seen.

use prometheus::{IntCounter, IntCounterVec, IntGaugeVec};

use crate::config::Config;
use crate::metrics::Registry;
use crate::vocab::metric;

#[derive(Clone)]
pub struct TopologyMetrics {
    nodes: IntGaugeVec,
    node_up: IntGaugeVec,
    failovers_total: IntCounterVec,
}

/// One target's handles.
pub(super) struct Handles {
    target: String,
    nodes: IntGaugeVec,
    node_up: IntGaugeVec,
    /// Nodes with a `node_up` series now.
    shown: Vec<String>,
    pub(super) failovers: IntCounter,
}

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
        };
        for t in &config.targets {
            m.failovers_total.with_label_values(&[&t.name]);
            for role in ["primary", "replica"] {
                m.nodes.with_label_values(&[&t.name, role]);
            }
        }
        Ok(m)
    }

    pub(super) fn for_target(&self, target: &str) -> Handles {
        Handles {
            target: target.to_string(),
            nodes: self.nodes.clone(),
            node_up: self.node_up.clone(),
            shown: Vec::new(),
            failovers: self.failovers_total.with_label_values(&[target]),
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
}
