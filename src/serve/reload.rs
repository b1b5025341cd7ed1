//! Reloading the config while running, as Prometheus does (SIGHUP, `POST /-/reload`): the
//! file is read and validated whole first; an invalid one changes nothing and is logged
//! naming file, line and key. This module owns `lockwatch_config_last_reload_*`; what a
//! valid config changes in the running parts is `parts`'.

use std::path::PathBuf;

use prometheus::{Gauge, IntGauge};

use super::parts::{Changes, Parts};
use crate::config::{Config, Overrides};
use crate::metrics::Registry;
use crate::vocab::metric;

/// Where a reload reads the config from: the file and the command line's overrides.
#[derive(Debug, Clone)]
pub struct ConfigSource {
    pub path: PathBuf,
    pub overrides: Overrides,
}

/// `lockwatch_config_last_reload_successful` and `…_success_timestamp_seconds`.
pub(super) struct ReloadMetrics {
    successful: IntGauge,
    success_time: Gauge,
}

impl ReloadMetrics {
    /// Registered once the config loaded at start: successful, now.
    pub(super) fn register(r: &Registry) -> Result<Self, prometheus::Error> {
        let m = ReloadMetrics {
            successful: r
                .int_gauges(
                    metric::CONFIG_LAST_RELOAD_SUCCESSFUL,
                    "1 when the last reload (or the start) loaded a valid config, 0 when it was refused.",
                    &[],
                )?
                .with_label_values(&[] as &[&str]),
            success_time: r
                .gauges(
                    metric::CONFIG_LAST_RELOAD_SUCCESS_TIMESTAMP_SECONDS,
                    "When the config last loaded (start or reload), Unix seconds.",
                    &[],
                )?
                .with_label_values(&[] as &[&str]),
        };
        m.succeeded();
        Ok(m)
    }

    fn succeeded(&self) {
        self.successful.set(1);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        self.success_time.set(now.as_secs_f64());
    }

    fn failed(&self, why: &str, error: &str) {
        self.successful.set(0);
        tracing::error!(%error, trigger = why, "reload refused: the running config stays");
    }
}

/// Reload from `source` (`why`: what asked): validated whole, then the parts brought to it
/// and `current` replaced; what changed. The error, one sentence, names file, line and key.
pub(super) async fn reload(
    why: &str,
    source: Option<&ConfigSource>,
    current: &mut Config,
    parts: &mut Parts,
    metrics: &ReloadMetrics,
) -> Result<Changes, String> {
    let Some(source) = source else {
        let e = "this run was given its config in memory, not a file: nothing to reload".to_string();
        tracing::warn!(trigger = why, "{e}");
        return Err(e);
    };
    tracing::info!(trigger = why, file = %source.path.display(), "reloading the config");
    let new = match Config::load(&source.path, &source.overrides) {
        Ok(c) => c,
        Err(e) => {
            let e = e.to_string();
            metrics.failed(why, &e);
            return Err(e);
        }
    };
    if new.server.listen != current.server.listen || new.server.limits != current.server.limits {
        tracing::warn!("server.listen and the connection limits take effect at the next start, not at a reload");
    }
    let changes: Changes = match parts.apply(current, &new).await {
        Ok(c) => c,
        Err(e) => {
            let e = e.to_string();
            metrics.failed(why, &e);
            return Err(e);
        }
    };
    tracing::info!(kept = changes.kept, restarted = ?changes.restarted, added = ?changes.added,
        removed = ?changes.removed, web_config = ?new.server.web.as_ref().map(|w| w.path.display().to_string()),
        "config reloaded");
    *current = new;
    metrics.succeeded();
    Ok(changes)
}
