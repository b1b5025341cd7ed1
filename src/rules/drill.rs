//! `LockDrillLeftFrozen`: a drill's freeze outlasted its planned end by more than
//! `drill_left_frozen_after` with no thaw reported — the drill or its watchdog died, or the
//! thaw failed, and a worker may be stopped right now. A drill reports to one replica of an
//! HA pair, so the earliest planned end of each target and namespace is taken across the
//! replicas (`min`, not the other rules' per-replica `max`): a freeze one replica knows is
//! never hidden by a later one another knows, and the pair pages once.

use super::alerts::{Alert, Dashboard, braces, either, listed, push_alert, variants};
use crate::config::Config;

pub(super) fn alert(out: &mut String, config: &Config) {
    let variants = variants(config, |t| t.drill_left_frozen_after);
    let branches = variants
        .iter()
        .map(|(sel, after)| {
            format!(
                "time() - min by (job, target, namespace) (lockwatch_drill_thaw_due_timestamp_seconds{}) > {}",
                braces(sel),
                after.as_secs_f64()
            )
        })
        .collect();
    let afters = listed(&variants, |after| crate::duration::format(*after));
    push_alert(
        out,
        &Alert {
            name: "LockDrillLeftFrozen",
            expr: either(branches),
            for_: "0m",
            severity: "critical",
            window: None,
            summary: "A drill left a worker frozen in namespace {{ $labels.namespace }} on target {{ $labels.target }}",
            description: format!(
                "A freeze of lockwatch drill --freeze in namespace {{{{ $labels.namespace }}}} on target {{{{ $labels.target }}}} should have been thawed {{{{ $value | humanizeDuration }}}} ago, and no thaw was reported (threshold {afters} past its planned end). The drill or its watchdog died, or the thaw failed: a worker may be stopped right now. The status page (or /api/v1/status, drill_freezes) names what is frozen and how to thaw it by hand."
            ),
            dashboard: Dashboard::Namespace { target: true },
        },
        &config.alerts,
    );
}
