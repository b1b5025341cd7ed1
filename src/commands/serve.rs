//! `lockwatch serve`: load the config, bind the listen address, run the exporter until
//! SIGTERM or Ctrl-C.

use anyhow::Context;

use super::{CommandError, Status};
use crate::cli::ServeArgs;
use crate::serve;

pub(super) async fn run(args: ServeArgs) -> Result<Status, CommandError> {
    let config = super::load_served(&args.config, args.listen.clone(), args.web_config_file.clone())?;
    let listen = config.server.listen;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    serve::run(listener, config, serve::shutdown_on_signals())
        .await
        .map_err(anyhow::Error::from)?;
    Ok(Status::Fine)
}
