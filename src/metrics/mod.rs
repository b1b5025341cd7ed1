//! The Prometheus registry lockwatch exports: registering families, encoding them for
//! `/metrics` (the 0.0.4 text format, or OpenMetrics with exemplars: `openmetrics`), and
//! the families of lockwatch itself (build info, process).
//!
//! Each working part (sampler, lifecycle watcher, intake) creates, registers and
//! pre-exports its own families here, and alone updates them; `/metrics` only encodes.
//! Beside the registry, the latest exemplar of each counter series (`exemplars`).

pub mod exemplars;
pub mod openmetrics;

pub use exemplars::{Exemplar, Exemplars, TraceContext};
pub use openmetrics::Format;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use prometheus::core::{Collector, MetricVec, MetricVecBuilder};
use prometheus::proto::MetricFamily;
use prometheus::{Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, TextEncoder};

use crate::vocab::metric;

/// Work run just before each encoding, so gauges that follow the clock are current; it
/// answers false once what it follows is gone, and is then dropped.
type Hook = Box<dyn Fn() -> bool + Send + Sync>;
/// Removes a family's series whose label (first) has the value (second).
type Remover = Box<dyn Fn(&str, &str) + Send + Sync>;

/// The registry every family is registered in.
#[derive(Clone)]
pub struct Registry {
    inner: prometheus::Registry,
    hooks: Arc<Mutex<Vec<Hook>>>,
    /// One per family made by the helpers below, for [`Registry::drop_series`].
    removers: Arc<Mutex<Vec<Remover>>>,
    /// The latest exemplar of each series that had one (the OpenMetrics exposition shows them).
    exemplars: Exemplars,
    /// Held to read every family (shared) and to set several series as one (exclusive,
    /// [`Registry::together`]): a scrape sees all of such a change or none of it.
    consistent: Arc<std::sync::RwLock<()>>,
}

impl Registry {
    /// A registry holding `lockwatch_build_info` and, on Linux, the process metrics.
    pub fn new() -> Result<Self, prometheus::Error> {
        let inner = prometheus::Registry::new();
        let build_info = IntGaugeVec::new(
            Opts::new(
                metric::BUILD_INFO,
                "Always 1; the version label says which lockwatch runs.",
            ),
            &["version"],
        )?;
        build_info.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        inner.register(Box::new(build_info))?;
        #[cfg(target_os = "linux")]
        inner.register(Box::new(prometheus::process_collector::ProcessCollector::for_self()))?;
        Ok(Registry {
            inner,
            hooks: Default::default(),
            removers: Default::default(),
            exemplars: Exemplars::default(),
            consistent: Default::default(),
        })
    }

    /// Register `family` and hand it back, for the part that owns it.
    pub fn register<C: Collector + Clone + 'static>(&self, family: C) -> Result<C, prometheus::Error> {
        self.inner.register(Box::new(family.clone()))?;
        Ok(family)
    }

    /// A registered family of integer gauges.
    pub fn int_gauges(&self, name: &str, help: &str, labels: &[&str]) -> Result<IntGaugeVec, prometheus::Error> {
        self.removable(self.register(IntGaugeVec::new(Opts::new(name, help), labels)?)?)
    }

    /// A registered family of float gauges.
    pub fn gauges(&self, name: &str, help: &str, labels: &[&str]) -> Result<GaugeVec, prometheus::Error> {
        self.removable(self.register(GaugeVec::new(Opts::new(name, help), labels)?)?)
    }

    /// A registered family of counters.
    pub fn counters(&self, name: &str, help: &str, labels: &[&str]) -> Result<IntCounterVec, prometheus::Error> {
        self.removable(self.register(IntCounterVec::new(Opts::new(name, help), labels)?)?)
    }

    /// A registered family of histograms with `buckets` (upper bounds, seconds).
    pub fn histograms(
        &self,
        name: &str,
        help: &str,
        buckets: &[f64],
        labels: &[&str],
    ) -> Result<HistogramVec, prometheus::Error> {
        self.removable(self.register(HistogramVec::new(
            HistogramOpts::new(name, help).buckets(buckets.to_vec()),
            labels,
        )?)?)
    }

    /// Remember how to remove series of `family`, for [`Registry::drop_series`].
    fn removable<T>(&self, family: MetricVec<T>) -> Result<MetricVec<T>, prometheus::Error>
    where
        T: MetricVecBuilder + 'static,
        MetricVec<T>: Collector,
    {
        let f = family.clone();
        let remover: Remover = Box::new(move |label, value| {
            for mf in f.collect() {
                for m in mf.get_metric() {
                    let pairs = m.get_label();
                    if pairs.iter().any(|p| p.name() == label && p.value() == value) {
                        let all: HashMap<&str, &str> = pairs.iter().map(|p| (p.name(), p.value())).collect();
                        let _ = f.remove(&all);
                    }
                }
            }
        });
        self.removers.lock().unwrap_or_else(|p| p.into_inner()).push(remover);
        Ok(family)
    }

    /// Remove, from every family, the series whose `label` is `value`: what a target,
    /// namespace or log source left behind once a reload removed it.
    pub fn drop_series(&self, label: &str, value: &str) {
        self.exemplars.drop_series(label, value);
        for remove in self.removers.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            remove(label, value);
        }
    }

    /// The exemplar store: the parts record the latest traced event of a series here.
    pub fn exemplars(&self) -> &Exemplars {
        &self.exemplars
    }

    /// Run `hook` before every encoding (e.g. to set gauges computed from the time now),
    /// until it answers false.
    pub fn before_encode(&self, hook: impl Fn() -> bool + Send + Sync + 'static) {
        self.hooks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Box::new(hook));
    }

    /// Every family, after the before-encode hooks ran: what both encodings write. Families
    /// are read one after the other; a change made [`together`](Self::together) is never
    /// read half (a namespace's held count from one census, its oldest lock from another).
    pub fn gather(&self) -> Vec<MetricFamily> {
        self.hooks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|hook| hook());
        let _reading = self.consistent.read().unwrap_or_else(|p| p.into_inner());
        self.inner.gather()
    }

    /// Set several series as one change: no scrape reads between them.
    pub fn together<R>(&self, change: impl FnOnce() -> R) -> R {
        let _writing = self.consistent.write().unwrap_or_else(|p| p.into_inner());
        change()
    }

    /// The text exposition format (0.0.4) of everything registered.
    pub fn encode(&self) -> Result<String, prometheus::Error> {
        let families = self.gather();
        let mut buf = Vec::with_capacity(16 * 1024);
        TextEncoder::new().encode(&families, &mut buf)?;
        String::from_utf8(buf).map_err(|e| prometheus::Error::Msg(e.to_string()))
    }

    /// The OpenMetrics 1.0 text of everything registered, each counter series with its
    /// latest exemplar (`openmetrics::encode`).
    pub fn encode_openmetrics(&self) -> String {
        openmetrics::encode(&self.gather(), &self.exemplars)
    }

    /// Everything registered in `format`.
    pub fn encode_as(&self, format: Format) -> Result<String, prometheus::Error> {
        match format {
            Format::Text => self.encode(),
            Format::OpenMetrics => Ok(self.encode_openmetrics()),
        }
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("exemplars", &self.exemplars.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Two series set together are never read half: a writer moving both on while scrapes
    /// gather; every scrape sees them equal.
    #[test]
    fn series_set_together_are_never_read_half() {
        let r = Registry::new().unwrap();
        let a = r.int_gauges("t_a", "a", &["x"]).unwrap();
        let b = r.int_gauges("t_b", "b", &["x"]).unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (r, a, b, stop) = (r.clone(), a.clone(), b.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    i += 1;
                    r.together(|| {
                        a.with_label_values(&["1"]).set(i);
                        b.with_label_values(&["1"]).set(i);
                    });
                }
            })
        };
        let value = |fams: &[MetricFamily], name: &str| {
            fams.iter()
                .find(|f| f.name() == name)
                .map(|f| f.get_metric()[0].get_gauge().value())
        };
        for _ in 0..3000 {
            let fams = r.gather();
            assert_eq!(value(&fams, "t_a"), value(&fams, "t_b"));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap();
    }
}
