//! `lockwatch serve`: load the config, bind the listen address, run the exporter until
//! SIGTERM or Ctrl-C, reloading the same file on SIGHUP (and `POST /-/reload` when enabled).

use anyhow::Context;

use super::{CommandError, Status};
use crate::cli::ServeArgs;
use crate::serve;

pub(super) async fn run(args: ServeArgs) -> Result<Status, CommandError> {
    let config = super::load_served(&args.config, args.listen.clone(), args.web_config_file.clone())?;
    let mut overrides = args.config.overrides(args.listen.clone());
    overrides.web_config_file = args.web_config_file.clone();
    let options = serve::Options {
        reload_from: Some(serve::ConfigSource {
            path: args.config.config.clone().unwrap_or_default(),
            overrides,
        }),
        enable_lifecycle: args.enable_lifecycle,
    };
    let listen = config.server.listen;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    serve::run_with(listener, config, options, serve::shutdown_on_signals())
        .await
        .map_err(anyhow::Error::from)?;
    Ok(Status::Fine)
}
