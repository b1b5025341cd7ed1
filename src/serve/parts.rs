//! The running parts of one run: per target its follower, sampler and watcher (stopped
//! together), per `[[logs]]` source its tailer. `apply` brings them to a new config: what
//! did not change runs on; a changed part restarts alone; a removed one stops. A namespace
//! change restarts each target's sampler on tables that carry the unchanged namespaces'
//! over, and the running watcher takes the new namespaces on its live subscription.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::ServeError;
use crate::config::{Config, LogConfig, Notifications, TargetConfig};
use crate::intake::tail::Tailer;
use crate::intake::{Classifier, Counters, IntakeMetrics};
use crate::lifecycle::metrics::WatcherMetrics;
use crate::lifecycle::{self, LifecycleState, Renamespace, Renamespacer, Watcher};
use crate::locks::TargetLocks;
use crate::metrics::Registry;
use crate::sampler::{Sampler, SamplerError, SamplerMetrics};
use crate::topology::{Follower, Nodes, TopologyMetrics};

/// How long a stopping part may take to finish (a tailer saves its offsets) before it is
/// left to end on its own.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The families the parts publish in, registered once per run: a restarted part continues
/// its counters, they are never registered again.
#[derive(Clone)]
pub(super) struct Families {
    pub(super) registry: Registry,
    pub(super) sampler: SamplerMetrics,
    pub(super) watcher: WatcherMetrics,
    pub(super) intake: IntakeMetrics,
    pub(super) topology: TopologyMetrics,
}

impl Families {
    pub(super) fn register(config: &Config, registry: Registry) -> Result<Self, prometheus::Error> {
        Ok(Families {
            sampler: SamplerMetrics::register(&registry, config)?,
            watcher: WatcherMetrics::register(&registry, config)?,
            intake: IntakeMetrics::register(&registry, config)?,
            topology: TopologyMetrics::register(&registry, config)?,
            registry,
        })
    }
}

/// One target's parts.
struct TargetRun {
    config: TargetConfig,
    locks: Arc<TargetLocks>,
    lifecycle: Option<Arc<LifecycleState>>,
    /// Where the running watcher takes new namespaces.
    renamespacer: Option<Renamespacer>,
    nodes: Nodes,
    stop: CancellationToken,
    /// The follower and the watcher.
    tasks: JoinSet<()>,
    /// The sampler, stopped on its own when the namespaces change.
    sampler: (CancellationToken, tokio::task::JoinHandle<()>),
}

/// One target's parts, built but not started yet.
struct Built {
    config: TargetConfig,
    locks: Arc<TargetLocks>,
    follower: Follower,
    nodes: Nodes,
    sampler: Sampler,
    watcher: Option<Watcher>,
}

/// One log source's tailer (stdin: its threads, which run until the process ends).
struct SourceRun {
    config: LogConfig,
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// What a reload changed, for its log line.
#[derive(Debug, Default)]
pub(super) struct Changes {
    pub(super) kept: usize,
    pub(super) restarted: Vec<String>,
    pub(super) added: Vec<String>,
    pub(super) removed: Vec<String>,
    /// The series to drop once nothing publishes them any more: (label, value).
    pub(super) gone: Vec<(&'static str, String)>,
}

/// Everything running for the current config.
pub(super) struct Parts {
    families: Families,
    targets: Vec<TargetRun>,
    sources: Vec<SourceRun>,
    classifier: Arc<Classifier>,
    shutdown: CancellationToken,
}

impl Parts {
    /// Build and start every part of `config`.
    pub(super) async fn start(
        config: &Config,
        families: Families,
        shutdown: CancellationToken,
    ) -> Result<Parts, ServeError> {
        for target in &config.targets {
            lifecycle::preflight(target, &config.namespaces).await?;
        }
        let built = config
            .targets
            .iter()
            .map(|t| build(t, config, &families))
            .collect::<Result<Vec<_>, _>>()?;
        make_state_dir(config)?;
        let mut parts = Parts {
            classifier: Arc::new(Classifier::new(config)?),
            families,
            targets: Vec::new(),
            sources: Vec::new(),
            shutdown,
        };
        for b in built {
            parts.launch(b, config);
        }
        for source in &config.logs {
            parts.start_source(source, config, true)?;
        }
        Ok(parts)
    }

    /// The log lines' classifier of the current config.
    pub(super) fn classifier(&self) -> Arc<Classifier> {
        self.classifier.clone()
    }

    /// Each target's lock tables, in config order.
    pub(super) fn targets(&self) -> Arc<[Arc<TargetLocks>]> {
        self.targets.iter().map(|t| t.locks.clone()).collect()
    }

    /// Each target's nodes, by target name (which servers they are, for the status page).
    pub(super) fn nodes(&self) -> Arc<[(String, Nodes)]> {
        self.targets
            .iter()
            .map(|t| (t.config.name.clone(), t.nodes.clone()))
            .collect()
    }

    /// The lifecycle watchers' states, of the targets whose notifications are not off.
    pub(super) fn lifecycles(&self) -> Arc<[Arc<LifecycleState>]> {
        self.targets.iter().filter_map(|t| t.lifecycle.clone()).collect()
    }

    /// Bring the parts from `old` to `new` (validated): everything new is built first, so
    /// an error (a preflight, a classifier) changes nothing; then changed and removed parts
    /// stop, and changed and added ones start. The series of removed ones are listed in
    /// `Changes::gone`, for the caller to drop once the new state is published.
    pub(super) async fn apply(&mut self, old: &Config, new: &Config) -> Result<Changes, ServeError> {
        // Every target watches every namespace, and the classifier knows them all. A target
        // whose own settings did not change restarts its tasks when the namespaces do, and
        // carries over the tables of those that did not; `show_owners` changes every table.
        let namespaces_changed = old.namespaces != new.namespaces;
        let owners_changed = old.server.show_owners != new.server.show_owners;
        let classifier_changed = namespaces_changed || format!("{:?}", old.rules) != format!("{:?}", new.rules);
        let mut changes = Changes::default();
        let mut built = Vec::new();
        let mut renamespaced = Vec::new();
        for t in &new.targets {
            let running = self.targets.iter().find(|r| r.config.name == t.name);
            let same = running.filter(|r| same_target(&r.config, t));
            if same.is_some() && !namespaces_changed && !owners_changed {
                changes.kept += 1;
                continue;
            }
            // Only the namespaces changed: the watcher (if any) runs on and takes them.
            if let Some(r) = same.filter(|_| !owners_changed) {
                lifecycle::preflight(t, &new.namespaces).await?;
                let locks = Arc::new(TargetLocks::carrying(
                    &r.locks,
                    t,
                    &new.namespaces,
                    new.server.show_owners,
                ));
                let sampler = Sampler::new(t, locks.clone(), self.families.sampler.clone(), r.nodes.clone())?;
                renamespaced.push((t.name.clone(), locks, sampler));
                changes.restarted.push(format!(
                    "target {} (its namespaces; unchanged ones' tables, history and subscriptions kept)",
                    t.name
                ));
                continue;
            }
            lifecycle::preflight(t, &new.namespaces).await?;
            built.push(build(t, new, &self.families)?);
            match running {
                Some(_) => changes.restarted.push(format!("target {}", t.name)),
                None => changes.added.push(format!("target {}", t.name)),
            }
        }
        let classifier = if classifier_changed {
            Arc::new(Classifier::new(new)?)
        } else {
            self.classifier.clone()
        };
        make_state_dir(new)?;

        // Nothing fails from here on.
        for (name, locks, sampler) in renamespaced {
            let Some(r) = self.targets.iter_mut().find(|r| r.config.name == name) else {
                continue;
            };
            r.sampler.0.cancel();
            if tokio::time::timeout(STOP_GRACE, &mut r.sampler.1).await.is_err() {
                r.sampler.1.abort();
            }
            let carried = r
                .locks
                .namespaces
                .iter()
                .map(|old| locks.namespaces.iter().position(|n| Arc::ptr_eq(n, old)))
                .collect();
            locks.resume(&r.locks);
            let handed = r.renamespacer.as_ref().is_some_and(|w| {
                w.send(Renamespace {
                    namespaces: new.namespaces.clone(),
                    locks: locks.clone(),
                    carried,
                })
            });
            if !handed {
                // No watcher follows the tables: scan mode.
                locks.unsubscribed();
            }
            r.locks = locks;
            let stop = r.stop.child_token();
            r.sampler = (stop.clone(), tokio::spawn(sampler.run(stop)));
        }
        let (stopping, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.targets).into_iter().partition(|r| {
            built.iter().any(|b| b.config.name == r.config.name) || !new.targets.iter().any(|t| t.name == r.config.name)
        });
        self.targets = kept;
        for mut r in stopping {
            r.stop.cancel();
            finish(&mut r).await;
            // Its scrape hook publishes nothing more.
            r.locks.unsubscribed();
            if !new.targets.iter().any(|t| t.name == r.config.name) {
                changes.removed.push(format!("target {}", r.config.name));
                changes.gone.push(("target", r.config.name.clone()));
            }
        }
        self.classifier = classifier;
        for b in built {
            self.launch(b, new);
        }
        self.targets
            .sort_by_key(|r| new.targets.iter().position(|t| t.name == r.config.name));

        let sources_changed = classifier_changed || old.state_dir != new.state_dir;
        for s in std::mem::take(&mut self.sources) {
            let wanted = new.logs.iter().find(|l| l.name == s.config.name);
            let keep = s.task.is_none() || wanted.is_some_and(|l| !sources_changed && *l == s.config);
            if keep {
                if s.task.is_some() {
                    changes.kept += 1;
                }
                self.sources.push(s);
                continue;
            }
            s.stop.cancel();
            if let Some(task) = s.task
                && tokio::time::timeout(STOP_GRACE, task).await.is_err()
            {
                tracing::warn!(source = %s.config.name, "log source still stopping");
            }
            match wanted {
                Some(l) => {
                    changes.restarted.push(format!("logs {}", l.name));
                    self.start_source(l, new, false)?;
                }
                None => {
                    changes.removed.push(format!("logs {}", s.config.name));
                    changes.gone.push(("source", s.config.name.clone()));
                }
            }
        }
        for l in &new.logs {
            if !self.sources.iter().any(|s| s.config.name == l.name) {
                changes.added.push(format!("logs {}", l.name));
                self.start_source(l, new, true)?;
            }
        }
        for ns in &old.namespaces {
            if !new.namespaces.iter().any(|n| n.name == ns.name) {
                changes.removed.push(format!("namespace {}", ns.name));
                changes.gone.push(("namespace", ns.name.clone()));
            }
        }
        Ok(changes)
    }

    /// Stop every part and wait for them (tailers save their offsets).
    pub(super) async fn stop(mut self) {
        self.shutdown.cancel();
        for r in &mut self.targets {
            finish(r).await;
        }
        for s in self.sources {
            if let Some(task) = s.task {
                let _ = tokio::time::timeout(STOP_GRACE, task).await;
            }
        }
    }

    fn launch(&mut self, b: Built, config: &Config) {
        tracing::info!(target_name = %b.config.name, url = %b.config.display_url,
            interval = %crate::duration::format(b.config.sample_interval), namespaces = config.namespaces.len(), "sampling");
        let stop = self.shutdown.child_token();
        let mut tasks = JoinSet::new();
        let sampler_stop = stop.child_token();
        let sampler = tokio::spawn(b.sampler.run(sampler_stop.clone()));
        let renamespacer = b.watcher.as_ref().map(Watcher::renamespacer);
        let lifecycle = b.watcher.map(|w| {
            let state = w.state();
            tasks.spawn(w.run(stop.clone()));
            state
        });
        tasks.spawn(b.follower.run(stop.clone()));
        self.targets.push(TargetRun {
            config: b.config,
            locks: b.locks,
            lifecycle,
            renamespacer,
            nodes: b.nodes,
            stop,
            tasks,
            sampler: (sampler_stop, sampler),
        });
    }

    /// Start reading `source`; `restore`: its saved counts go to the counters (not when a
    /// reload restarts it: they hold them already).
    fn start_source(&mut self, source: &LogConfig, config: &Config, restore: bool) -> Result<(), ServeError> {
        let namespaces: Vec<String> = config.namespaces.iter().map(|n| n.name.clone()).collect();
        let stop = self.shutdown.child_token();
        let task = if source.path == "-" {
            let counters = Counters::new(&self.families.intake, &namespaces, &source.name);
            let stdin = std::io::BufReader::new(std::io::stdin());
            crate::intake::stdin::spawn(source, stdin, self.classifier.clone(), counters).map_err(ServeError::Stdin)?;
            None
        } else {
            let tailer = Tailer::new(
                source,
                self.classifier.clone(),
                &self.families.intake,
                &namespaces,
                config.state_dir.as_deref(),
                restore,
            );
            let stop = stop.clone();
            Some(tokio::spawn(async move {
                tailer.run(stop).await;
            }))
        };
        self.sources.push(SourceRun {
            config: source.clone(),
            stop,
            task,
        });
        Ok(())
    }
}

/// Build `target`'s parts for `config` (they connect once started).
fn build(target: &TargetConfig, config: &Config, families: &Families) -> Result<Built, ServeError> {
    let locks = Arc::new(TargetLocks::new(target, &config.namespaces, config.server.show_owners));
    let (follower, nodes) = Follower::new(target, &families.topology).map_err(SamplerError::from)?;
    let sampler = Sampler::new(target, locks.clone(), families.sampler.clone(), nodes.clone())?;
    let watcher = if target.notifications != Notifications::Off {
        Some(Watcher::new(
            target,
            &config.namespaces,
            locks.clone(),
            &families.watcher,
            nodes.clone(),
        )?)
    } else {
        None
    };
    Ok(Built {
        config: target.clone(),
        locks,
        follower,
        nodes,
        sampler,
        watcher,
    })
}

/// Wait for a stopping target's tasks, for at most [`STOP_GRACE`].
async fn finish(r: &mut TargetRun) {
    let tasks = &mut r.tasks;
    let sampler = &mut r.sampler.1;
    let all = async {
        while tasks.join_next().await.is_some() {}
        let _ = sampler.await;
    };
    if tokio::time::timeout(STOP_GRACE, all).await.is_err() {
        tracing::warn!(target_name = %r.config.name, "target's tasks still stopping: aborted");
        r.tasks.abort_all();
        r.sampler.1.abort();
    }
}

fn make_state_dir(config: &Config) -> Result<(), ServeError> {
    if let Some(dir) = &config.state_dir {
        std::fs::create_dir_all(dir).map_err(|source| ServeError::StateDir {
            dir: dir.display().to_string(),
            source,
        })?;
    }
    Ok(())
}

/// Whether two configs of a target are the same. `Debug` leaves out the passwords and the
/// PEM bytes, so those are compared on their own.
pub(super) fn same_target(a: &TargetConfig, b: &TargetConfig) -> bool {
    fn passwords(t: &TargetConfig) -> Vec<Option<String>> {
        let mut all = vec![t.connection.redis_settings().password().map(str::to_string)];
        match &t.topology {
            crate::config::Topology::Standalone => {}
            crate::config::Topology::Cluster { seeds } => {
                all.extend(seeds.iter().map(|s| s.redis_settings().password().map(str::to_string)));
            }
            crate::config::Topology::Sentinel(s) => {
                all.extend(
                    s.sentinels
                        .iter()
                        .map(|s| s.redis_settings().password().map(str::to_string)),
                );
            }
        }
        all
    }
    format!("{a:?}") == format!("{b:?}") && a.tls == b.tls && passwords(a) == passwords(b)
}
