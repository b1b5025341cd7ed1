//! A small Chrome DevTools Protocol harness: real headless Chromium (`/usr/bin/chromium`)
//! launched on a free debugging port, driven as JSON over its websocket. Tabs are flat
//! sessions of one browser connection; every event is kept, so a test can ask afterwards
//! for console errors, exceptions and the URLs requested. A missing Chromium fails the
//! test with the command that installs it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub const CHROMIUM: &str = "/usr/bin/chromium";

pub struct Browser {
    child: Child,
    _profile: tempfile::TempDir,
    ws: Ws,
    next_id: u64,
    /// Every event received: (session id, method, params).
    pub events: Vec<(String, String, Value)>,
}

/// One tab: a flat session.
#[derive(Clone)]
pub struct Tab(pub String);

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    /// Start headless Chromium and connect to it.
    pub async fn launch() -> Browser {
        assert!(
            Path::new(CHROMIUM).is_file(),
            "{CHROMIUM} not found: install it with `sudo apt-get install chromium`"
        );
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new(CHROMIUM)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {CHROMIUM} ({e}): `sudo apt-get install chromium`"));
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        // Reads the DevTools line, then keeps draining stderr so Chromium never blocks on it.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) = line.split("DevTools listening on ").nth(1)
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(url.trim().to_string());
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("chromium did not print `DevTools listening on ws://…` within 20 s");
        let (ws, _) = tokio_tungstenite::connect_async(url.as_str()).await.unwrap();
        Browser {
            child,
            _profile: profile,
            ws,
            next_id: 0,
            events: Vec::new(),
        }
    }

    /// Send `method` (to `tab`, or the browser) and wait for its answer; events meanwhile kept.
    pub async fn call(&mut self, tab: Option<&Tab>, method: &str, params: Value) -> Value {
        match self.try_call(tab, method, params).await {
            Ok(v) => v,
            Err(e) => panic!("{method}: {e}"),
        }
    }

    /// As `call`, the protocol's error given back instead of failing.
    async fn try_call(&mut self, tab: Option<&Tab>, method: &str, params: Value) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(t) = tab {
            msg["sessionId"] = json!(t.0);
        }
        self.ws.send(Message::text(msg.to_string())).await.unwrap();
        loop {
            let v = self
                .next_message(Duration::from_secs(30))
                .await
                .unwrap_or_else(|| panic!("no answer to {method}"));
            if v["id"].as_u64() == Some(id) {
                if let Some(e) = v.get("error") {
                    return Err(e.clone());
                }
                return Ok(v["result"].clone());
            }
        }
    }

    async fn next_message(&mut self, limit: Duration) -> Option<Value> {
        loop {
            let m = tokio::time::timeout(limit, self.ws.next()).await.ok()??.ok()?;
            let Message::Text(t) = m else { continue };
            let v: Value = serde_json::from_str(&t).unwrap();
            if let Some(method) = v["method"].as_str() {
                let session = v["sessionId"].as_str().unwrap_or("").to_string();
                self.events.push((session, method.to_string(), v["params"].clone()));
            }
            return Some(v);
        }
    }

    /// A new tab with page, runtime, log and network events on.
    pub async fn tab(&mut self) -> Tab {
        let t = self
            .call(None, "Target.createTarget", json!({"url": "about:blank"}))
            .await;
        let a = self
            .call(
                None,
                "Target.attachToTarget",
                json!({"targetId": t["targetId"], "flatten": true}),
            )
            .await;
        let tab = Tab(a["sessionId"].as_str().unwrap().to_string());
        for m in ["Page.enable", "Runtime.enable", "Log.enable", "Network.enable"] {
            self.call(Some(&tab), m, json!({})).await;
        }
        tab
    }

    /// Load `url` in `tab` and wait for its load event.
    pub async fn navigate(&mut self, tab: &Tab, url: &str) {
        let seen = self.events.len();
        let r = self.call(Some(tab), "Page.navigate", json!({"url": url})).await;
        assert!(r.get("errorText").is_none(), "navigating to {url}: {r}");
        let started = Instant::now();
        while !self.events[seen..]
            .iter()
            .any(|(s, m, _)| *s == tab.0 && m == "Page.loadEventFired")
        {
            assert!(started.elapsed() < Duration::from_secs(20), "{url} did not load");
            self.next_message(Duration::from_secs(20)).await;
        }
    }

    /// Evaluate `expr` in the page, its value returned (promises awaited).
    /// A page's context replaced under the call ("Inspected target navigated or closed",
    /// seen on a loaded machine just after a load) is tried again, a few times.
    pub async fn eval(&mut self, tab: &Tab, expr: &str) -> Value {
        let params = json!({"expression": expr, "returnByValue": true, "awaitPromise": true});
        let mut tries = 0;
        let r = loop {
            match self.try_call(Some(tab), "Runtime.evaluate", params.clone()).await {
                Ok(r) => break r,
                Err(e) if tries < 5 && e["message"].as_str().is_some_and(|m| m.contains("navigated or closed")) => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("Runtime.evaluate: {e}"),
            }
        };
        assert!(r.get("exceptionDetails").is_none(), "{expr}: {r}");
        r["result"]["value"].clone()
    }

    /// Evaluate `expr` until it is true, or fail after `limit`; the time it took.
    pub async fn wait_until(&mut self, tab: &Tab, expr: &str, limit: Duration) -> Duration {
        let started = Instant::now();
        loop {
            if self.eval(tab, expr).await == json!(true) {
                return started.elapsed();
            }
            assert!(started.elapsed() < limit, "not true within {limit:?}: {expr}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The document as the DOM holds it now (works with JavaScript disabled).
    pub async fn html(&mut self, tab: &Tab) -> String {
        let doc = self.call(Some(tab), "DOM.getDocument", json!({"depth": 0})).await;
        let r = self
            .call(Some(tab), "DOM.getOuterHTML", json!({"nodeId": doc["root"]["nodeId"]}))
            .await;
        r["outerHTML"].as_str().unwrap().to_string()
    }

    /// A screenshot of `tab` at `width` px (phone-like below 600), in `scheme` (light or
    /// dark), the whole page, into `path`.
    pub async fn screenshot(&mut self, tab: &Tab, path: &Path, width: u32, scheme: &str) {
        let mobile = width < 600;
        self.call(
            Some(tab),
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": mobile}),
        )
        .await;
        self.call(
            Some(tab),
            "Emulation.setEmulatedMedia",
            json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]}),
        )
        .await;
        let m = self.call(Some(tab), "Page.getLayoutMetrics", json!({})).await;
        let height = m["cssContentSize"]["height"].as_f64().unwrap_or(900.0).min(6000.0);
        let r = self
            .call(
                Some(tab),
                "Page.captureScreenshot",
                json!({"format": "png", "captureBeyondViewport": true,
                       "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}}),
            )
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap())
            .unwrap();
        std::fs::write(path, png).unwrap();
    }

    /// Console errors, uncaught exceptions and error log entries of `tab`, in words.
    pub fn errors(&self, tab: &Tab) -> Vec<String> {
        self.events
            .iter()
            .filter(|(s, _, _)| *s == tab.0)
            .filter_map(|(_, m, p)| match m.as_str() {
                "Runtime.consoleAPICalled" if p["type"] == "error" => Some(format!("console.error: {}", p["args"])),
                "Runtime.exceptionThrown" => Some(format!("exception: {}", p["exceptionDetails"])),
                "Log.entryAdded" if p["entry"]["level"] == "error" => Some(format!("log: {}", p["entry"])),
                _ => None,
            })
            .collect()
    }

    /// Every URL `tab` requested.
    pub fn requests(&self, tab: &Tab) -> Vec<String> {
        self.events
            .iter()
            .filter(|(s, m, _)| *s == tab.0 && m == "Network.requestWillBeSent")
            .filter_map(|(_, _, p)| p["request"]["url"].as_str().map(str::to_string))
            .collect()
    }
}
