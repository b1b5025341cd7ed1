//! `lockwatch advise`: read what the namespaces' locks did (Prometheus over `--window`, or
//! an exporter since it started) and print the recommended settings with their reasoning,
//! as text, the TOML snippet alone, or JSON. Exit 0 also when there is too little data:
//! the output says so.

use super::{CommandError, Status};
use crate::advise::{self, AdviseError, Options, Source};
use crate::cli::{AdviseArgs, AdviseFormat};

pub(super) async fn run(args: AdviseArgs) -> Result<Status, CommandError> {
    let config = super::load(&args.config, None)?;
    let from = match (&args.prometheus, &args.exporter) {
        (Some(url), _) => {
            let window = crate::duration::parse(&args.window)
                .map_err(|e| CommandError::Usage(format!("--window `{}`: {e}", args.window)))?;
            if window.is_zero() {
                return Err(CommandError::Usage("--window must be longer than 0s".into()));
            }
            Source::Prometheus {
                url: url.clone(),
                window,
            }
        }
        (None, Some(url)) => Source::Exporter { url: url.clone() },
        (None, None) => return Err(CommandError::Usage("pass --prometheus URL or --exporter URL".into())),
    };
    let opts = Options {
        from,
        namespace: args.namespace.clone(),
    };
    let report = advise::run(&config, &opts).await.map_err(|e| match e {
        AdviseError::NoNamespace(_) => CommandError::Usage(e.to_string()),
        AdviseError::Source { .. } => CommandError::Failed(e.into()),
    })?;
    let out = match args.format {
        AdviseFormat::Text => advise::text(&report),
        AdviseFormat::Toml => advise::toml(&report),
        AdviseFormat::Json => advise::json(&report),
    };
    print!("{out}");
    Ok(Status::Fine)
}
