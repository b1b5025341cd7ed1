//! `lockwatch demo`: the self-contained demo, until SIGTERM or Ctrl-C.

use super::{CommandError, Status};
use crate::cli::DemoArgs;
use crate::{demo, serve};

pub(super) async fn run(args: DemoArgs) -> Result<Status, CommandError> {
    let options = demo::Options {
        listen: args.listen,
        redis_server: args.redis_server,
    };
    demo::run(&options, serve::shutdown_on_signals())
        .await
        .map_err(anyhow::Error::from)?;
    Ok(Status::Fine)
}
