//! One incident, one alert, however many lockwatch replicas watch it: every per-instance
//! aggregation `agg by (job, instance, L…) (E)` the rules are written with becomes
//! `max by (job, L…) (agg by (job, instance, pod, L…) (E))` — each replica's figure, then
//! the largest, never their sum — and joins `on (job, instance, L…)` become `on (job, L…)`.

/// `expr` aggregated across replicas (see the module doc); other text is left as it is.
pub(super) fn across(expr: &str) -> String {
    let mut out = String::with_capacity(expr.len() + 64);
    let mut rest = expr;
    while let Some((at, agg)) = next_aggregation(rest) {
        out.push_str(&rest[..at]);
        let after = &rest[at + agg.len() + BY.len()..];
        let Some(close) = after.find(')') else { break };
        let labels = after[..close].trim_start_matches(',').trim();
        let body = &after[close + 1..];
        let Some(open) = body.find('(').filter(|o| body[..*o].trim().is_empty()) else {
            out.push_str(&rest[at..at + agg.len()]);
            rest = &rest[at + agg.len()..];
            continue;
        };
        let Some(end) = matching(&body[open..]).map(|e| open + e) else {
            break;
        };
        let inner = &body[open + 1..end];
        let (kept, per) = if labels.is_empty() {
            ("job".to_string(), "job, instance, pod".to_string())
        } else {
            (format!("job, {labels}"), format!("job, instance, pod, {labels}"))
        };
        out.push_str(&format!("max by ({kept}) ({agg} by ({per}) ({inner}))"));
        rest = &body[end + 1..];
    }
    out.push_str(rest);
    out.replace("on (job, instance, ", "on (job, ")
        .replace("on (job, instance)", "on (job)")
}

const BY: &str = " by (job, instance";

/// Where the next `agg by (job, instance…` begins, and its operator.
fn next_aggregation(s: &str) -> Option<(usize, &'static str)> {
    ["sum", "max", "min", "count"]
        .into_iter()
        .filter_map(|agg| s.find(&format!("{agg}{BY}")).map(|at| (at, agg)))
        .min_by_key(|(at, _)| *at)
}

/// The index of the parenthesis closing the one `s` starts with.
fn matching(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::across;

    #[test]
    fn per_replica_figures_are_compared_not_added() {
        assert_eq!(
            across("sum by (job, instance, target, namespace) (increase(x{a=\"b\"}[15m])) > 0"),
            "max by (job, target, namespace) (sum by (job, instance, pod, target, namespace) (increase(x{a=\"b\"}[15m]))) > 0"
        );
        assert_eq!(
            across("a\nand on (job, instance, namespace)\nmax by (job, instance, target) (up) == 0"),
            "a\nand on (job, namespace)\nmax by (job, target) (max by (job, instance, pod, target) (up)) == 0"
        );
        assert_eq!(across("up{job=\"lockwatch\"} == 0"), "up{job=\"lockwatch\"} == 0");
    }
}
