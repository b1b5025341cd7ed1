//! `lockwatch discover`: the target from `--url` (a config of one target made from it) or
//! from `-c` and `--target`, walked within the budget, the report printed. Exit 2 for a bad
//! URL or config, 1 when Redis cannot be read.

use std::path::Path;

use super::{CommandError, Status};
use crate::cli::DiscoverArgs;
use crate::config::{Config, Overrides, Secret};
use crate::discover::{self, Budget};

pub(super) async fn run(args: DiscoverArgs) -> Result<Status, CommandError> {
    let overrides = Overrides {
        redis_password: std::env::var("LOCKWATCH_REDIS_PASSWORD")
            .ok()
            .filter(|p| !p.is_empty())
            .map(Secret::new),
        ..Overrides::default()
    };
    let config = match (&args.url, &args.config) {
        (Some(url), _) => {
            let text = format!("[[target]]\nname = \"discover\"\nurl = {}\n", toml_string(url));
            Config::from_toml(&text, "--url", Path::new("."), &overrides)?
        }
        (None, Some(path)) => Config::load(path, &overrides)?,
        (None, None) => return Err(CommandError::Usage("give --url URL or -c CONFIG".into())),
    };
    let target = match &args.target {
        Some(name) => config
            .targets
            .iter()
            .find(|t| &t.name == name)
            .ok_or_else(|| CommandError::Usage(format!("no target `{name}` in the config")))?,
        None if config.targets.len() == 1 => &config.targets[0],
        None => {
            return Err(CommandError::Usage(format!(
                "the config has {} targets; choose one with --target",
                config.targets.len()
            )));
        }
    };
    let budget = Budget {
        rate: args.rate,
        max_keys: args.max_keys,
    };
    let report = discover::run(target, budget).await.map_err(anyhow::Error::from)?;
    discover::render(&report, args.format, &mut std::io::stdout().lock()).map_err(anyhow::Error::from)?;
    Ok(Status::Fine)
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    let escaped: String = s
        .chars()
        .flat_map(|c| match c {
            '"' | '\\' => vec!['\\', c],
            c if c.is_control() => format!("\\u{:04X}", u32::from(c)).chars().collect(),
            c => vec![c],
        })
        .collect();
    format!("\"{escaped}\"")
}
