//! `[[target]] mode`: how a target's Redis is laid out — one server (`standalone`), a Redis
//! Cluster found from seed `nodes`, or a primary followed through `sentinels` by
//! `master_name` — checked at load. Discovering and following the nodes is `topology`'s job.

use std::path::Path;

use redis::IntoConnectionInfo;

use super::choice::choice_enum;
use super::raw::RawTarget;
use super::secret::read_secret;
use super::target::redact_url;
use super::{ConfigError, Cx};

choice_enum!(
    /// How the target's Redis is laid out (`mode`).
    Mode {
        /// One server at `url`.
        #[default]
        Standalone => "standalone",
        /// A Redis Cluster: every primary is sampled and watched.
        Cluster => "cluster",
        /// A primary (and replicas) behind Sentinel: the current primary is followed.
        Sentinel => "sentinel",
    }
);

/// The nodes lockwatch starts from, per mode.
#[derive(Debug, Clone)]
pub enum Topology {
    Standalone,
    /// Seed nodes (`url` and `nodes`), credentials and TLS of the target applied; the
    /// cluster itself says which nodes it has.
    Cluster {
        seeds: Vec<redis::ConnectionInfo>,
    },
    Sentinel(SentinelSettings),
}

/// Where to ask for the primary of a Sentinel-watched group.
#[derive(Debug, Clone)]
pub struct SentinelSettings {
    pub master_name: String,
    /// The sentinels, with their own credentials (URL user info or `sentinel_password_file`).
    pub sentinels: Vec<redis::ConnectionInfo>,
}

impl Topology {
    pub fn mode(&self) -> Mode {
        match self {
            Topology::Standalone => Mode::Standalone,
            Topology::Cluster { .. } => Mode::Cluster,
            Topology::Sentinel(_) => Mode::Sentinel,
        }
    }
}

/// What the target's connection settings come from: the URL (standalone, a seed, or the
/// scheme, credentials and database of a Sentinel-found primary), as written.
pub(super) struct Template {
    pub url: String,
    pub span: Option<std::ops::Range<usize>>,
    pub key: String,
    pub info: redis::ConnectionInfo,
}

impl Cx<'_> {
    /// The connection template and the topology of target `i`; `url` is `--redis-url` or
    /// the target's own. The password is applied by the caller.
    pub(super) fn topology(
        &self,
        t: &RawTarget,
        i: usize,
        url: Option<(String, Option<std::ops::Range<usize>>, String)>,
        base: &Path,
    ) -> Result<(Template, Topology), ConfigError> {
        let k = |field: &str| format!("target[{i}].{field}");
        let mode: Mode = self.choice(t.mode.as_ref(), &k("mode"))?;
        let only = |v: Option<std::ops::Range<usize>>, key: &str, modes: &str| -> Result<(), ConfigError> {
            match v {
                Some(span) => Err(self.err(
                    Some(&span),
                    k(key),
                    format!("only for mode = {modes} (this target's mode is \"{}\")", mode.as_str()),
                )),
                None => Ok(()),
            }
        };
        if mode != Mode::Cluster {
            only(t.nodes.as_ref().map(|v| v.span()), "nodes", "\"cluster\"")?;
        }
        if mode != Mode::Sentinel {
            only(t.sentinels.as_ref().map(|v| v.span()), "sentinels", "\"sentinel\"")?;
            only(t.master_name.as_ref().map(|v| v.span()), "master_name", "\"sentinel\"")?;
            only(
                t.sentinel_password_file.as_ref().map(|v| v.span()),
                "sentinel_password_file",
                "\"sentinel\"",
            )?;
        }
        let parse = |u: &str, span: Option<&std::ops::Range<usize>>, key: &str| {
            let info = u.into_connection_info().map_err(|e| {
                self.err(
                    span,
                    key,
                    format!("not a Redis URL ({e}): write redis://host:port/db or rediss:// for TLS"),
                )
            })?;
            // Every URL of the target (seeds and sentinels too): one way to turn checks off.
            if let redis::ConnectionAddr::TcpTls { insecure: true, .. } = info.addr() {
                return Err(self.err(span, key, super::tls::INSECURE_URL));
            }
            Ok(info)
        };
        let template = |(u, span, key): (String, Option<std::ops::Range<usize>>, String)| {
            let info = parse(&u, span.as_ref(), &key)?;
            Ok::<_, ConfigError>(Template {
                url: u,
                span,
                key,
                info,
            })
        };
        match mode {
            Mode::Standalone => {
                let Some(url) = url else {
                    return Err(self.err(
                        Some(&t.name.span()),
                        k("url"),
                        "missing: write url = \"redis://host:port/db\" (or set mode = \"cluster\" with nodes, or \"sentinel\")",
                    ));
                };
                Ok((template(url)?, Topology::Standalone))
            }
            Mode::Cluster => {
                let mut seeds = Vec::new();
                let mut first = url.map(template).transpose()?;
                if let Some(f) = &first {
                    seeds.push(f.info.clone());
                }
                for (n, node) in t.nodes.iter().flat_map(|v| v.get_ref().iter()).enumerate() {
                    let key = format!("{}[{n}]", k("nodes"));
                    let span = t.nodes.as_ref().map(|v| v.span());
                    let info = parse(node, span.as_ref(), &key)?;
                    if first.is_none() {
                        first = Some(Template {
                            url: node.clone(),
                            span: span.clone(),
                            key: key.clone(),
                            info: info.clone(),
                        });
                    }
                    seeds.push(info);
                }
                let Some(first) = first else {
                    return Err(self.err(
                        Some(&t.name.span()),
                        k("nodes"),
                        "missing: a cluster target needs seed nodes, e.g. nodes = [\"redis://10.0.0.1:6379\", \"redis://10.0.0.2:6379\"]",
                    ));
                };
                let tls = |i: &redis::ConnectionInfo| matches!(i.addr(), redis::ConnectionAddr::TcpTls { .. });
                if seeds.iter().any(|s| tls(s) != tls(&first.info)) {
                    return Err(self.err(
                        first.span.as_ref(),
                        k("nodes"),
                        "mixes redis:// and rediss:// seeds: a cluster's nodes all speak TLS or none does",
                    ));
                }
                // Valkey 9 serves several databases in cluster mode (`cluster-databases`):
                // the target watches one, named alike by every seed.
                let db = first.info.redis_settings().db();
                let other = |u: &String| parse(u, None, "").map_or(db, |i| i.redis_settings().db());
                let mut nodes = t.nodes.iter().flat_map(|v| v.get_ref().iter()).enumerate();
                if let Some((n, node)) = nodes.find(|(_, u)| other(u) != db) {
                    return Err(self.err(
                        t.nodes.as_ref().map(|v| v.span()).as_ref(),
                        format!("{}[{n}]", k("nodes")),
                        format!(
                            "names database {} ({}), and {} names database {db} ({}): a cluster target watches one database, named alike by every seed",
                            other(node),
                            redact_url(node),
                            first.key,
                            redact_url(&first.url)
                        ),
                    ));
                }
                Ok((first, Topology::Cluster { seeds }))
            }
            Mode::Sentinel => {
                let Some(name) = &t.master_name else {
                    return Err(self.err(
                        Some(&t.name.span()),
                        k("master_name"),
                        "missing: the name the sentinels know the primary by (the `sentinel monitor <name> …` line)",
                    ));
                };
                let list = t.sentinels.as_ref().map(|v| v.get_ref().as_slice()).unwrap_or_default();
                if list.is_empty() {
                    return Err(self.err(
                        t.sentinels.as_ref().map(|v| v.span()).as_ref().or(Some(&t.name.span())),
                        k("sentinels"),
                        "missing: list the sentinels, e.g. sentinels = [\"redis://10.0.0.1:26379\", \"redis://10.0.0.2:26379\"]",
                    ));
                }
                let password = match &t.sentinel_password_file {
                    Some(f) => Some(
                        read_secret(&base.join(f.get_ref()))
                            .map_err(|e| self.err(Some(&f.span()), k("sentinel_password_file"), e))?,
                    ),
                    None => None,
                };
                let span = t.sentinels.as_ref().map(|v| v.span());
                let mut sentinels = Vec::with_capacity(list.len());
                for (n, s) in list.iter().enumerate() {
                    let mut info = parse(s, span.as_ref(), &format!("{}[{n}]", k("sentinels")))?;
                    if let Some(p) = &password {
                        let settings = info.redis_settings().clone().set_password(p.expose());
                        info = info.set_redis_settings(settings);
                    }
                    sentinels.push(info);
                }
                // The primary's scheme, user, password and database; its address is the sentinels' word.
                let url = url.unwrap_or_else(|| ("redis://127.0.0.1:6379/0".to_string(), None, k("url")));
                Ok((
                    template(url)?,
                    Topology::Sentinel(SentinelSettings {
                        master_name: name.get_ref().clone(),
                        sentinels,
                    }),
                ))
            }
        }
    }
}
