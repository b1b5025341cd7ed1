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
            let text = format!("[[target]]\nname = \"discover\"\nurl = {}\n", discover::quote(url));
            Config::from_toml(&text, "--url", Path::new("."), &overrides)?
        }
        (None, Some(path)) => Config::load(path, &overrides)?,
        (None, None) => return Err(CommandError::Usage("give --url URL or -c CONFIG".into())),
    };
    let target = config
        .target(args.target.as_deref())
        .map_err(|e| CommandError::Usage(e.to_string()))?;
    let budget = Budget {
        rate: args.rate,
        max_keys: args.max_keys,
    };
    let report = discover::run(target, budget).await.map_err(anyhow::Error::from)?;
    discover::render(&report, args.format, &mut std::io::stdout().lock()).map_err(anyhow::Error::from)?;
    Ok(Status::Fine)
}
