//! `check-config --connect` for a cluster or Sentinel target: the topology questions
//! lockwatch asks (a cluster's `CLUSTER SHARDS`/`SLOTS` and `ASKING`; each sentinel's
//! `SENTINEL` questions and its `+switch-master` channel), each refusal named with the rule
//! that grants it; then the primaries, each checked like a standalone server under its
//! own name (`target main node 10.0.0.1:6379`).

use std::io::Write;

use super::check_grants::refused;
use crate::access::connect::at_addr;
use crate::access::probe::{self, Missing};
use crate::access::sentinel::{self, SWITCH_CHANNEL, Sentinel};
use crate::access::{NodeAddr, cluster};
use crate::config::{TargetConfig, Topology};

/// The rules a cluster target needs beyond a standalone one.
pub(super) const CLUSTER_RULES: [&str; 3] = ["+cluster|shards", "+cluster|slots", "+asking"];
/// The rule for the sentinels (when they have ACL users of their own).
pub(super) const SENTINEL_RULE: &str = "ACL SETUSER lockwatch reset on >PASSWORD -@all +sentinel|get-master-addr-by-name +sentinel|replicas +subscribe &+switch-master";

/// Check the topology questions of `t`; return whether they are all allowed, and the
/// primaries to check one by one (each a target of its own, named after its node).
pub(super) async fn topology(t: &TargetConfig, out: &mut impl Write) -> std::io::Result<(bool, Vec<TargetConfig>)> {
    match &t.topology {
        Topology::Standalone => Ok((true, vec![t.clone()])),
        Topology::Cluster { .. } => cluster_nodes(t, out).await,
        Topology::Sentinel(s) => sentinel_nodes(t, &s.master_name, out).await,
    }
}

/// A primary of `t` as a target of its own.
fn node_view(t: &TargetConfig, node: &NodeAddr, cluster: bool) -> TargetConfig {
    let info = at_addr(&t.connection, node);
    TargetConfig {
        name: format!("{} node {node}", t.name),
        display_url: node.to_string(),
        topology: match cluster {
            true => Topology::Cluster {
                seeds: vec![info.clone()],
            },
            false => Topology::Standalone,
        },
        connection: info,
        ..t.clone()
    }
}

async fn cluster_nodes(t: &TargetConfig, out: &mut impl Write) -> std::io::Result<(bool, Vec<TargetConfig>)> {
    let mut conn = match crate::access::connect::once(t).await {
        Ok(c) => c,
        Err(e) => {
            let e = crate::access::tls::explain(t, &e);
            writeln!(out, "✗ target {}: cannot connect to a seed node: {e}", t.name)?;
            return Ok((false, Vec::new()));
        }
    };
    let mut healthy = true;
    let ask = |name, rule, args: &[&str]| {
        let mut cmd = redis::cmd(name);
        cmd.arg(args);
        (name, rule, cmd)
    };
    let asked = [
        ask("CLUSTER", "cluster|shards", &["SHARDS"]),
        ask("CLUSTER", "cluster|slots", &["SLOTS"]),
        ask("ASKING", "asking", &[]),
    ];
    let why = [
        "optional: the topology is read with CLUSTER SLOTS without it",
        "the topology, and the routed reads' slot map",
        "reads follow ASK redirections while slots migrate",
    ];
    for ((name, rule, cmd), why) in asked.iter().zip(why) {
        match probe::refusal(&mut conn, name, rule, cmd, "").await {
            Ok(None) => {}
            Ok(Some(m)) => {
                let optional = *rule == "cluster|shards";
                healthy &= optional;
                let mark = if optional { "!" } else { "✗" };
                let said = match (&m, *rule) {
                    // Not an ACL's refusal: the server does not have the command here.
                    (Missing::Other { why: answer, .. }, "cluster|shards") => format!(
                        "CLUSTER SHARDS is not available here ({answer}: Redis Cloud, Upstash and servers before 7.0 lack it)"
                    ),
                    _ => refused(&m),
                };
                writeln!(out, "  {mark} target {}: {said} — {why}", t.name)?;
            }
            Err(e) => {
                writeln!(out, "✗ target {}: {e}", t.name)?;
                return Ok((false, Vec::new()));
            }
        }
    }
    let tls = matches!(t.connection.addr(), redis::ConnectionAddr::TcpTls { .. });
    match cluster::shards(&mut conn, tls).await {
        Ok(shards) => {
            let replicas: usize = shards.iter().map(|s| s.replicas.len()).sum();
            writeln!(
                out,
                "✓ target {}: a cluster of {} primaries and {replicas} replicas; each primary is checked below",
                t.name,
                shards.len()
            )?;
            Ok((healthy, shards.iter().map(|s| node_view(t, &s.primary, true)).collect()))
        }
        Err(e) => {
            let detail = e.detail().unwrap_or_default().to_ascii_lowercase();
            if detail.contains("cluster support disabled") || detail.contains("unknown") {
                writeln!(
                    out,
                    "✗ target {}: this endpoint answers no cluster command ({e}): a single server, or a proxy that hides the cluster (Azure Managed Redis with the Enterprise policy, ElastiCache Serverless, Redis Cloud without the OSS Cluster API) — use mode = \"standalone\" for it; the proxy routes every command",
                    t.name
                )?;
            } else {
                writeln!(out, "✗ target {}: cannot read the cluster's shards: {e}", t.name)?;
            }
            Ok((false, Vec::new()))
        }
    }
}

async fn sentinel_nodes(
    t: &TargetConfig,
    name: &str,
    out: &mut impl Write,
) -> std::io::Result<(bool, Vec<TargetConfig>)> {
    let sentinels = match Sentinel::all(t) {
        Ok(s) => s,
        Err(e) => {
            writeln!(out, "✗ target {}: {e}", t.name)?;
            return Ok((false, Vec::new()));
        }
    };
    let mut healthy = true;
    let mut primary = None;
    let mut missing_any = false;
    for s in &sentinels {
        let mut conn = match s.connect().await {
            Ok(c) => c,
            Err(e) => {
                healthy = false;
                writeln!(out, "  ✗ target {}: sentinel {}: cannot connect: {e}", t.name, s.addr)?;
                continue;
            }
        };
        let mut missing = Vec::new();
        let questions = [
            (
                "SENTINEL",
                "sentinel|get-master-addr-by-name",
                "GET-MASTER-ADDR-BY-NAME",
            ),
            ("SENTINEL", "sentinel|replicas", "REPLICAS"),
        ];
        for (cmd_name, rule, sub) in questions {
            let mut cmd = redis::cmd(cmd_name);
            cmd.arg(sub).arg(name);
            if let Ok(Some(m)) = probe::refusal(&mut conn, cmd_name, rule, &cmd, "").await {
                missing.push(m);
            }
        }
        if let Err(e) = subscribe_switch(s).await {
            let text = e.to_string();
            missing.push(if text.contains("NOPERM") && text.contains("channel") {
                Missing::Channel {
                    channel: SWITCH_CHANNEL.into(),
                }
            } else if text.contains("NOPERM") {
                Missing::Command {
                    name: "SUBSCRIBE",
                    rule: "subscribe",
                    on: String::new(),
                }
            } else {
                Missing::Other {
                    name: "SUBSCRIBE",
                    why: text,
                }
            });
        }
        for m in &missing {
            writeln!(out, "  ✗ target {}: sentinel {}: {}", t.name, s.addr, refused(m))?;
        }
        healthy &= missing.is_empty();
        missing_any |= !missing.is_empty();
        if primary.is_none() {
            match sentinel::primary(&mut conn, name).await {
                Ok(Some(p)) => primary = Some(p),
                Ok(None) => writeln!(out, "  ✗ target {}: sentinel {} does not know `{name}`", t.name, s.addr)?,
                Err(_) => {}
            }
        }
    }
    if missing_any {
        writeln!(
            out,
            "  → on the sentinels, when they have ACL users (replace PASSWORD): {SENTINEL_RULE}"
        )?;
    }
    let Some(primary) = primary else {
        writeln!(out, "✗ target {}: no sentinel named the primary of `{name}`", t.name)?;
        return Ok((false, Vec::new()));
    };
    writeln!(
        out,
        "✓ target {}: sentinels name {primary} as the primary of `{name}`; it is checked below",
        t.name
    )?;
    Ok((healthy, vec![node_view(t, &primary, false)]))
}

/// Subscribe to `+switch-master` on `s` and leave.
async fn subscribe_switch(s: &Sentinel) -> redis::RedisResult<()> {
    let mut pubsub = s.pubsub().await?;
    tokio::time::timeout(crate::access::connect::TIMEOUT, pubsub.subscribe(SWITCH_CHANNEL))
        .await
        .map_err(|_| redis::RedisError::from((redis::ErrorKind::Io, "SUBSCRIBE timed out")))?
}
