//! What a run works on, settled before anything is touched: the target and namespace (with
//! the production guard and the checks that the namespace suits a drill), the run id, the
//! keys of each cycle under the run's unique prefix, and the scripts worker A runs.

use std::path::PathBuf;
use std::time::Duration;

use super::worker::Scripts;
use super::{DrillError, Options};
use crate::access::scripts::{SAFE_RELEASE, SAFE_RENEW};
use crate::config::{Config, NamespaceConfig, TargetConfig, Topology};

/// Longest namespace ttl the drill accepts: worker A stays frozen that long.
const MAX_TTL: Duration = Duration::from_secs(120);

/// The keys of one cycle, all under the run's prefix; the rollback deletes exactly these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    /// `<prefix>drill-<run>-<n><suffix>`, under the namespace's pattern.
    pub lock: String,
    /// The fencing counter, where the namespace's `fence_pattern` puts it.
    pub fence: String,
    /// The fenced resource: `lockwatch-drill:<run>:<n>:resource`.
    pub resource: String,
}

/// A run's target, namespace, id and worker A's scripts.
pub(crate) struct Plan<'a> {
    pub(crate) target: &'a TargetConfig,
    pub(crate) ns: &'a NamespaceConfig,
    /// Eight hex digits, unique per run: every key of the run carries it.
    pub(crate) run_id: String,
    /// Worker A's release and renew (the application's, or the safe ones).
    pub(crate) scripts: Scripts,
    /// The node the run works on (`host:port`), once connected: a cluster's node serving
    /// the run's hash tag, or the primary the sentinels name.
    pub(crate) node: String,
}

impl<'a> Plan<'a> {
    /// Pick the target and namespace, apply the production guard, read the scripts.
    pub(crate) fn new(config: &'a Config, opts: &Options) -> Result<Self, DrillError> {
        let (target, ns) = choose(config, opts)?;
        let scripts = Scripts {
            release: load_script(&opts.release_script, SAFE_RELEASE)?,
            renew: load_script(&opts.renew_script, SAFE_RENEW)?,
        };
        Ok(Plan {
            target,
            ns,
            run_id: format!("{:08x}", rand_id()),
            scripts,
            node: String::new(),
        })
    }

    /// The keys of cycle `n` (1 for the narrated cycle, more when sustained).
    pub(crate) fn keys(&self, n: u64) -> Keys {
        let cluster = matches!(self.target.topology, Topology::Cluster { .. });
        keys_for(self.ns, &self.run_id, n, cluster)
    }

    /// The namespace's ttl in milliseconds, as worker A's requests carry it.
    pub(crate) fn ttl_ms(&self) -> u64 {
        u64::try_from(self.ns.ttl.as_millis()).unwrap_or(u64::MAX)
    }

    /// A `redis-cli` command line to see something yourself.
    pub(crate) fn cli(&self, args: &str) -> String {
        let tls = self.target.cli_tls(false);
        match (&self.target.topology, self.node.rsplit_once(':')) {
            (Topology::Cluster { .. }, Some((host, port))) => format!("redis-cli -c {tls}-h {host} -p {port} {args}"),
            (Topology::Sentinel(_), Some((host, port))) => format!("redis-cli {tls}-h {host} -p {port} {args}"),
            _ => format!(
                "redis-cli {}-u '{}' {args}",
                self.target.cli_tls(true),
                self.target.display_url
            ),
        }
    }
}

/// On a cluster (`tagged`), the run's keys share the hash tag `{drill-<run>}`, so the
/// lock, its fencing counter and the resource live in one slot, on one node: the scripts
/// that touch several of them can run there.
fn keys_for(ns: &NamespaceConfig, run_id: &str, n: u64, tagged: bool) -> Keys {
    let (p, s) = ns.pattern.single_wildcard().unwrap_or_default();
    let id = match tagged {
        true => format!("{{drill-{run_id}}}-{n}"),
        false => format!("drill-{run_id}-{n}"),
    };
    let lock = format!("{}{id}{}", String::from_utf8_lossy(&p), String::from_utf8_lossy(&s));
    let fence = ns
        .fence_map()
        .key_for(lock.as_bytes())
        .map(|k| String::from_utf8_lossy(&k).into_owned())
        .unwrap_or_else(|| format!("{lock}:fence"));
    let resource = match tagged {
        true => format!("lockwatch-drill:{{drill-{run_id}}}:{n}:resource"),
        false => format!("lockwatch-drill:{run_id}:{n}:resource"),
    };
    Keys { resource, lock, fence }
}

/// The target `name` names (or the config's only one), unless it is marked production and
/// `allow_production` is not given: then why, with what the drill does (`does`).
pub(crate) fn pick_target<'a>(
    config: &'a Config,
    name: Option<&str>,
    allow_production: bool,
    does: &str,
) -> Result<&'a TargetConfig, String> {
    let target = match name {
        Some(name) => config
            .targets
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| format!("no target `{name}` in the config"))?,
        None => match config.targets.as_slice() {
            [only] => only,
            _ => return Err("the config has several targets: pick one with --target".into()),
        },
    };
    if target.environment.as_deref() == Some("production") && !allow_production {
        return Err(format!(
            "target {} is marked environment = \"production\": {does}; run it in staging, or pass --allow-production if you really mean it",
            target.name
        ));
    }
    Ok(target)
}

/// The target and namespace, or why the drill cannot run on them.
fn choose<'a>(config: &'a Config, opts: &Options) -> Result<(&'a TargetConfig, &'a NamespaceConfig), DrillError> {
    let target = pick_target(
        config,
        opts.target.as_deref(),
        opts.allow_production,
        "the drill pauses a lock holder and lets its lock expire",
    )
    .map_err(DrillError::Usage)?;
    let ns = config.namespace(&opts.namespace).ok_or_else(|| {
        DrillError::Usage(format!(
            "no namespace `{}` in the config: add one for the drill (e.g. pattern \"drill:lock:*\", fence_pattern \"drill:fence:*\", ttl \"3s\") or pass --namespace",
            opts.namespace
        ))
    })?;
    if ns.pattern.single_wildcard().is_none() {
        return Err(DrillError::Usage(format!(
            "namespace {}: the drill needs a pattern with one `*` (like \"drill:lock:*\") to put its keys under",
            ns.name
        )));
    }
    if ns.fence_pattern.as_ref().and_then(|f| f.single_wildcard()).is_none() {
        return Err(DrillError::Usage(format!(
            "namespace {} has no fence_pattern with one `*` (like \"drill:fence:*\"): the drill issues fencing tokens there, where lockwatch does not mistake them for locks",
            ns.name
        )));
    }
    if ns.ttl > MAX_TTL {
        return Err(DrillError::Usage(format!(
            "namespace {}: ttl {} would pause worker A for that long; use a drill namespace with a short ttl (a few seconds)",
            ns.name,
            crate::duration::format(ns.ttl)
        )));
    }
    Ok((target, ns))
}

fn load_script(path: &Option<PathBuf>, default: &str) -> Result<String, DrillError> {
    match path {
        None => Ok(default.to_string()),
        Some(p) => std::fs::read_to_string(p).map_err(|source| DrillError::Script {
            path: p.display().to_string(),
            source,
        }),
    }
}

/// A run id that differs between runs, also of two drills started at once.
pub(crate) fn rand_id() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish() as u32
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::Overrides;

    const NS: &str = "[[namespace]]\nname = \"drill\"\npattern = \"drill:lock:*\"\nfence_pattern = \"drill:fence:*\"\nttl = \"1s\"\n";

    fn config(target_extra: &str, ns: &str) -> Config {
        let text = format!("[[target]]\nname = \"staging\"\nurl = \"redis://127.0.0.1:1\"\n{target_extra}\n{ns}");
        Config::from_toml(&text, "t.toml", Path::new("."), &Overrides::default()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn opts() -> Options {
        Options::new("t.toml")
    }

    fn usage(r: Result<Plan<'_>, DrillError>) -> String {
        match r {
            Err(DrillError::Usage(m)) => m,
            Err(e) => panic!("not a usage error: {e}"),
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn keys_live_under_the_run_prefix() {
        let c = config("", NS);
        let plan = Plan::new(&c, &opts()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(plan.run_id.len(), 8);
        let k = plan.keys(2);
        let id = &plan.run_id;
        assert_eq!(k.lock, format!("drill:lock:drill-{id}-2"));
        assert_eq!(k.fence, format!("drill:fence:drill-{id}-2"));
        assert_eq!(k.resource, format!("lockwatch-drill:{id}:2:resource"));
        assert_eq!(plan.ttl_ms(), 1000);
        assert_eq!(plan.scripts.release, SAFE_RELEASE);
        assert!(plan.cli("GET x").starts_with("redis-cli -u 'redis://127.0.0.1:1"));
    }

    #[test]
    fn production_and_unfit_namespaces_are_refused() {
        let prod = config("environment = \"production\"", NS);
        assert!(usage(Plan::new(&prod, &opts())).contains("--allow-production"));
        let allowed = Options {
            allow_production: true,
            ..opts()
        };
        assert!(Plan::new(&prod, &allowed).is_ok());
        let nope = Options {
            namespace: "nope".into(),
            ..allowed.clone()
        };
        assert!(usage(Plan::new(&prod, &nope)).contains("no namespace `nope`"));
        let unfenced = config(
            "",
            "[[namespace]]\nname = \"drill\"\npattern = \"drill:lock:*\"\nttl = \"1s\"\n",
        );
        assert!(usage(Plan::new(&unfenced, &opts())).contains("fence_pattern"));
        let long = config("", &NS.replace("\"1s\"", "\"5m\""));
        assert!(usage(Plan::new(&long, &opts())).contains("short ttl"));
        let missing = Options {
            release_script: Some("/nonexistent/release.lua".into()),
            ..opts()
        };
        assert!(matches!(
            Plan::new(&config("", NS), &missing),
            Err(DrillError::Script { .. })
        ));
    }
}
