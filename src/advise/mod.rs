//! `lockwatch advise`: per namespace, what its locks really did — hold durations, renewal
//! intervals, TTL headroom, the longest stall, takeovers — read from Prometheus over a
//! window or from a running exporter, and the `ttl`, `renew_every` and `renew_grace` that
//! would have survived it, with the reasoning. Fetching is `source`'s, the arithmetic
//! `histogram`'s and `recommend`'s (pure), the words `render`'s.

mod histogram;
mod recommend;
mod render;
mod source;

use serde::Serialize;

pub use recommend::{Advice, MIN_EVENTS};
pub use render::{json, text, toml};

use crate::config::Config;

/// Where the observations come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// Prometheus scraping lockwatch: `increase` over `window` (e.g. `7d`).
    Prometheus { url: String, window: std::time::Duration },
    /// A lockwatch exporter: everything since it started.
    Exporter { url: String },
}

#[derive(Debug, Clone)]
pub struct Options {
    pub from: Source,
    /// Only this namespace.
    pub namespace: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum AdviseError {
    #[error("no namespace `{0}` in the config")]
    NoNamespace(String),
    #[error("{url}: {why}")]
    Source { url: String, why: String },
}

/// What `advise` found and recommends.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Where from, over what: "Prometheus http://… over the last 7d".
    pub source: String,
    pub namespaces: Vec<Advice>,
}

/// Read the observations and advise on each configured namespace (or the one asked for).
pub async fn run(config: &Config, opts: &Options) -> Result<Report, AdviseError> {
    let namespaces: Vec<_> = match &opts.namespace {
        Some(name) => vec![
            config
                .namespace(name)
                .ok_or_else(|| AdviseError::NoNamespace(name.clone()))?,
        ],
        None => config.namespaces.iter().collect(),
    };
    let (mut by, source) = match &opts.from {
        Source::Prometheus { url, window } => {
            let w = crate::duration::format(*window);
            (
                source::prometheus(url, &w).await?,
                format!("Prometheus {url} over the last {w}"),
            )
        }
        Source::Exporter { url } => (
            source::exporter(url).await?,
            format!("the exporter {url}, since it started"),
        ),
    };
    let namespaces = namespaces
        .into_iter()
        .map(|ns| recommend::advise(ns, &by.remove(&ns.name).unwrap_or_default()))
        .collect();
    Ok(Report { source, namespaces })
}
