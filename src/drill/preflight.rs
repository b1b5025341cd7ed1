//! Pre-flight, once the target answered: what the drill will be able to see — keyspace
//! notifications (through the access layer's `notify`), the exporter, Prometheus — as
//! findings for the narrator and the report. Nothing found here stops the run.

use redis::aio::MultiplexedConnection;

use super::plan::Plan;
use super::probes::Probes;
use crate::access::notify::{self, Flags};

/// The findings, in the order they are said: (what, what was found).
pub(crate) async fn findings(
    plan: &Plan<'_>,
    conn: &mut MultiplexedConnection,
    probes: &Probes,
) -> Vec<(String, String)> {
    let target = plan.target;
    let mut found = vec![(
        "target".to_string(),
        format!(
            "{} ({}), environment {}",
            target.name,
            target.display_url,
            target.environment.as_deref().unwrap_or("not set")
        ),
    )];
    let notifications = match notify::read(conn).await {
        Ok(Flags::Set(flags)) => {
            let missing = notify::missing_flags(&flags, &notify::needed_flags(std::slice::from_ref(plan.ns)));
            if missing.is_empty() {
                format!("on (\"{flags}\"): transitions and takeovers will be counted")
            } else {
                format!("\"{flags}\" lacks {missing}: lockwatch will count no transitions or takeovers")
            }
        }
        Ok(Flags::Unreadable(why)) => format!("unknown ({why})"),
        Err(e) => format!("unknown ({e})"),
    };
    found.push(("keyspace notifications".into(), notifications));
    if let Some((url, ok)) = probes.exporter_health().await {
        found.push((
            "exporter".into(),
            if ok {
                format!("{url} answers: counters will be checked")
            } else {
                format!("{url} does not answer: counters cannot be checked")
            },
        ));
    }
    if let (Some(url), Some(alerts)) = (probes.prometheus(), probes.lock_alerts().await) {
        found.push((
            "prometheus".into(),
            match alerts {
                Ok(a) if a.is_empty() => format!("{url} answers; no lock alert is pending or firing"),
                Ok(a) => format!(
                    "{url} answers; already active: {}",
                    a.iter()
                        .map(|(n, s)| format!("{n} ({s})"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Err(e) => format!("{url}: {e}"),
            },
        ));
    }
    found
}
