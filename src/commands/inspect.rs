//! `lockwatch inspect`: a key's owner, TTL verdict, fence and lifecycle, or a namespace's
//! locks closest to expiry first; exit 1 for a key that does not exist.

use super::{CommandError, Status};
use crate::cli::InspectArgs;
use crate::inspect::{self, InspectError, Report};

pub(super) async fn run(args: InspectArgs) -> Result<Status, CommandError> {
    let config = super::load(&args.config, None)?;
    let request = inspect::Request {
        key: args.key.clone(),
        namespace: args.namespace.clone(),
        target: args.target.clone(),
        show_owner: args.show_owner,
        exporter: args.exporter.clone(),
        limit: args.limit,
    };
    let report = inspect::run(&config, &request).await.map_err(|e| match e {
        InspectError::Redis { .. } | InspectError::Timeout { .. } => CommandError::Failed(e.into()),
        usage => CommandError::Usage(usage.to_string()),
    })?;
    let mut out = std::io::stdout().lock();
    let written = match &report {
        Report::Key(k) => inspect::render_key(k, args.format, &mut out),
        Report::Namespace(n) => inspect::render_namespace(n, args.format, &mut out),
    };
    written.map_err(anyhow::Error::from)?;
    Ok(if report.healthy() {
        Status::Fine
    } else {
        Status::Unhealthy
    })
}
