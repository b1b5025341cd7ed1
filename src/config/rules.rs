//! `[[rule]]`: the operator's own classification rules — a regex and the lock event
//! (`op`, `outcome`, optional `namespace`) a matching line stands for. Applying them to
//! lines, before the built-in rules, is `intake::classify`'s job.

use super::raw::RawRule;
use super::{ConfigError, Cx, NamespaceConfig};
use crate::vocab::{Op, Outcome, UNKNOWN_NAMESPACE};

#[derive(Debug, Clone)]
pub struct RuleConfig {
    pub pattern: regex::Regex,
    pub op: Op,
    pub outcome: Outcome,
    pub namespace: Option<String>,
}

impl Cx<'_> {
    /// The rules, in order; a rule's `namespace` must be configured (or `unknown`).
    pub(super) fn rules(
        &self,
        raw: Vec<RawRule>,
        namespaces: &[NamespaceConfig],
    ) -> Result<Vec<RuleConfig>, ConfigError> {
        raw.into_iter()
            .enumerate()
            .map(|(i, r)| {
                let k = |field: &str| format!("rule[{i}].{field}");
                let pattern = regex::RegexBuilder::new(r.pattern.get_ref())
                    .size_limit(1 << 20)
                    .build()
                    .map_err(|e| self.err(Some(&r.pattern.span()), k("match"), format!("bad regex: {e}")))?;
                let op =
                    r.op.get_ref()
                        .parse::<Op>()
                        .map_err(|e| self.err(Some(&r.op.span()), k("op"), e))?;
                let outcome = r
                    .outcome
                    .get_ref()
                    .parse::<Outcome>()
                    .map_err(|e| self.err(Some(&r.outcome.span()), k("outcome"), e))?;
                if let Some(ns) = &r.namespace
                    && ns.get_ref() != UNKNOWN_NAMESPACE
                    && !namespaces.iter().any(|n| &n.name == ns.get_ref())
                {
                    return Err(self.err(
                        Some(&ns.span()),
                        k("namespace"),
                        format!("`{}` is not a configured namespace", ns.get_ref()),
                    ));
                }
                Ok(RuleConfig {
                    pattern,
                    op,
                    outcome,
                    namespace: r.namespace.map(|n| n.into_inner()),
                })
            })
            .collect()
    }
}
