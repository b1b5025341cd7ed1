//! What drills report to the exporter: the freezes of `lockwatch drill --freeze` live now
//! (`freezes`) and every drill's result (`results`), each checked against the config, kept
//! in memory and in `[state] dir`, and shown as gauges; the records refused, by reason, are
//! one counter for both (`refused`).

pub mod freezes;
mod refused;
pub mod results;

pub use refused::Refused;

use crate::config::Config;
use crate::metrics::Registry;

/// Both stores, for the HTTP side and the reload.
pub struct Drills {
    pub freezes: freezes::Freezes,
    pub results: results::Results,
    refusals: refused::Refusals,
}

impl Drills {
    /// The families registered and what `[state] dir` saved read back.
    pub fn start(config: &Config, registry: &Registry) -> Result<Drills, prometheus::Error> {
        let refusals = refused::Refusals::register(registry)?;
        Ok(Drills {
            freezes: freezes::Freezes::start(config, registry, refusals.clone())?,
            results: results::Results::start(config, registry, refusals.clone())?,
            refusals,
        })
    }

    /// A record refused before it was read (size, token, content type, room, time).
    pub fn refused(&self, reason: crate::vocab::DrillRefused, message: &str) {
        self.refusals.count(reason, message);
    }

    /// Follow a new config.
    pub fn reconfigure(&self, config: &Config) {
        self.freezes.reconfigure(config);
        self.results.reconfigure(config);
    }
}

/// A config for the stores' tests: `server` lines, target `target`, each of `namespaces`,
/// and `[state] dir` when given.
#[cfg(test)]
fn test_config(server: &str, target: &str, namespaces: &[&str], dir: Option<&std::path::Path>) -> Config {
    let mut text = format!("[server]\n{server}\n[[target]]\nname = \"{target}\"\nurl = \"redis://127.0.0.1:6379/0\"\n");
    for (i, ns) in namespaces.iter().enumerate() {
        text.push_str(&format!(
            "[[namespace]]\nname = \"{ns}\"\npattern = \"{ns}{i}:*\"\nttl = \"30s\"\n"
        ));
    }
    if let Some(dir) = dir {
        text.push_str(&format!("[state]\ndir = \"{}\"\n", dir.display()));
    }
    #[allow(clippy::unwrap_used)]
    Config::from_toml(
        &text,
        "t.toml",
        std::path::Path::new("."),
        &crate::config::Overrides::default(),
    )
    .unwrap()
}
