//! The `lockwatch` binary: parse arguments, set up logging, run the command, and exit with
//! its status (0 fine, 1 unhealthy or failed, 2 usage or config error).

use std::process::ExitCode;

use clap::Parser;
use lockwatch::cli::Cli;
use lockwatch::commands;

/// mimalloc rather than glibc's malloc: small blocks (keys, entries) without a per-block
/// header, and memory freed after a burst (notifications queued, reads in flight) goes back
/// to the system instead of staying in per-thread arenas (README: memory per tracked lock).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    commands::init_tracing(cli.log_format, &cli.log_level);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lockwatch: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(commands::run(cli.command));
    // The command is done; a thread still blocked on stdin (an interrupted drill's prompt)
    // must not hold up the exit.
    runtime.shutdown_background();
    if let Err(e) = &result {
        eprintln!("lockwatch: {}", commands::describe(e));
    }
    commands::exit_code(&result)
}
