//! What one tracked lock costs in each structure that holds it: each is filled with N locks
//! (`lockwatch::lifecycle::footprint`) under a counting allocator, and the heap it holds
//! afterwards is divided by N (capacity reserved counts, allocator overhead does not: the
//! exporter's RSS per lock, `benches/lifecycle_load.rs`, shows that).
//!
//! `cargo bench --bench footprint`; sizes from `LOCKWATCH_FOOTPRINT_SIZES=100000,1000000`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use lockwatch::lifecycle::footprint as fp;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// A structure's name and how to fill it.
type Row = (&'static str, Box<dyn FnOnce() -> fp::Filled>);

/// Net heap bytes and live allocations `fill` leaves behind.
fn weigh(fill: impl FnOnce() -> fp::Filled) -> (i64, i64) {
    let region = Region::new(GLOBAL);
    let kept = fill();
    let c = region.change();
    drop(kept);
    // (A realloc counts its growth in `bytes_allocated` and its shrinking in `bytes_deallocated`.)
    let bytes = c.bytes_allocated as i64 - c.bytes_deallocated as i64;
    (bytes, c.allocations as i64 - c.deallocations as i64)
}

fn main() {
    let sizes: Vec<usize> = std::env::var("LOCKWATCH_FOOTPRINT_SIZES")
        .unwrap_or_else(|_| "100000,1000000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    println!("| structure | locks | heap held | heap per lock | allocations per lock |");
    println!("|---|---:|---:|---:|---:|");
    for &n in &sizes {
        let rows: [Row; 5] = [
            (
                "lock table, events mode (entry + key)",
                Box::new(move || fp::lock_table(n)),
            ),
            ("lifecycle tracker, held", Box::new(move || fp::tracker(n, false))),
            (
                "lifecycle tracker, held, a SET … XX renewal pending (headroom kept)",
                Box::new(move || fp::tracker(n, true)),
            ),
            (
                "history (capped at 100,000 records per target)",
                Box::new(move || fp::history(n)),
            ),
            (
                "suspects (at most 100,000 per namespace)",
                Box::new(move || fp::suspects(n)),
            ),
        ];
        for (name, fill) in rows {
            let (bytes, allocs) = weigh(fill);
            println!(
                "| {name} | {n} | {:.1} MiB | {:.1} B | {:.2} |",
                bytes as f64 / 1048576.0,
                bytes as f64 / n as f64,
                allocs as f64 / n as f64
            );
        }
    }
    let (bytes, _) = weigh(fp::recent);
    println!("| last-hour ring, per namespace (not per lock) | — | {bytes} B | — | — |");
}
