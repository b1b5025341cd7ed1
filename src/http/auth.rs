//! Basic auth and response headers from the web config, as a middleware on every path but
//! `/healthz` (and the push endpoints when a push token guards them instead).
//!
//! bcrypt is slow on purpose, so, as the exporter-toolkit does, each verdict is cached by
//! user and password (bounded; refusals are forgotten first, so guessing cannot push a
//! scraper's verdict out), and only one bcrypt comparison runs at a time, on the blocking
//! pool: a scraper that sends the same credentials costs one comparison in all. At most
//! `MAX_WAITING` requests wait for a comparison; past that the answer is a 503 at once, so
//! guessed passwords cannot keep every connection waiting.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;

use crate::config::{Secret, WebConfig};

/// Verdicts kept; past this, a tenth of them are dropped.
const CACHE_LIMIT: usize = 100;
/// Longest `Authorization` value looked at: far above any real user and password.
const MAX_AUTHORIZATION: usize = 4096;
/// Requests waiting for (or in) a bcrypt comparison at once.
const MAX_WAITING: usize = 8;

/// What the credentials of a request earn.
enum Verdict {
    Allowed,
    Refused,
    /// Too many comparisons waiting: not judged.
    Busy,
}

/// What the middleware checks and adds.
pub(crate) struct WebAuth {
    users: BTreeMap<String, Secret>,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// The push endpoints (`POST /api/v1/events`, the shippers', the drills') have their own
    /// bearer token when it is set: basic auth is not asked there.
    push_token: bool,
    /// (user, password) → allowed. Plain passwords stay in memory, as they must arrive
    /// in every request anyway; the map is bounded.
    cache: Mutex<HashMap<(String, String), bool>>,
    /// One bcrypt comparison at a time.
    bcrypt: tokio::sync::Mutex<()>,
    /// Room for [`MAX_WAITING`] requests waiting for one.
    waiting: tokio::sync::Semaphore,
}

impl WebAuth {
    pub(crate) fn new(web: &WebConfig, push_token: bool) -> WebAuth {
        let headers = web
            .headers
            .iter()
            .filter_map(|(n, v)| Some((HeaderName::try_from(n).ok()?, HeaderValue::try_from(v).ok()?)))
            .collect();
        WebAuth {
            users: web.users.clone(),
            headers,
            push_token,
            cache: Mutex::new(HashMap::new()),
            bcrypt: tokio::sync::Mutex::new(()),
            waiting: tokio::sync::Semaphore::new(MAX_WAITING),
        }
    }

    fn open(&self, path: &str) -> bool {
        let push = crate::vocab::PUSH_PATHS.contains(&path)
            || path == crate::vocab::DRILL_FREEZES_PATH
            || path == crate::vocab::DRILLS_PATH;
        self.users.is_empty() || path == "/healthz" || (self.push_token && push)
    }

    /// Whether the request's basic auth names a user and that user's password.
    async fn allows(&self, headers: &HeaderMap) -> Verdict {
        let verdict = |ok| if ok { Verdict::Allowed } else { Verdict::Refused };
        let Some((user, password)) = basic_credentials(headers) else {
            return Verdict::Refused;
        };
        let key = (user, password);
        if let Some(ok) = self.cache.lock().ok().and_then(|c| c.get(&key).copied()) {
            return verdict(ok);
        }
        let Ok(_waiting) = self.waiting.try_acquire() else {
            return Verdict::Busy;
        };
        // An unknown user is compared against a known user's hash, so the answer takes as
        // long as for a known one and does not tell which names exist.
        let known = self.users.get(&key.0);
        let Some(hash) = known.or_else(|| self.users.values().next()) else {
            return Verdict::Refused;
        };
        let (hash, password) = (hash.expose().to_string(), key.1.clone());
        let matched = {
            let _one = self.bcrypt.lock().await;
            tokio::task::spawn_blocking(move || bcrypt::verify(password, &hash).unwrap_or(false))
                .await
                .unwrap_or(false)
        };
        let ok = matched && known.is_some();
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= CACHE_LIMIT {
                // Refusals first: a flood of guesses must not evict a scraper's verdict.
                let mut drop: Vec<_> = cache.iter().filter(|(_, ok)| !**ok).map(|(k, _)| k.clone()).collect();
                drop.truncate(CACHE_LIMIT / 10);
                if drop.is_empty() {
                    drop = cache.keys().take(CACHE_LIMIT / 10).cloned().collect();
                }
                for k in drop {
                    cache.remove(&k);
                }
            }
            cache.insert(key, ok);
        }
        verdict(ok)
    }
}

/// `Authorization: Basic base64(user:password)`, decoded.
fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.as_bytes();
    if value.len() > MAX_AUTHORIZATION {
        return None;
    }
    let text = std::str::from_utf8(value).ok()?;
    let (scheme, encoded) = text.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
    let (user, password) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

/// The middleware: the configured headers on every answer, 401 without valid credentials.
pub(crate) async fn check(State(auth): State<Arc<WebAuth>>, request: Request, next: Next) -> Response {
    let verdict = match auth.open(request.uri().path()) {
        true => Verdict::Allowed,
        false => auth.allows(request.headers()).await,
    };
    let mut response = match verdict {
        Verdict::Allowed => next.run(request).await,
        Verdict::Busy => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            "503: too many basic auth checks at once; retry in a second\n",
        )
            .into_response(),
        Verdict::Refused => (
            StatusCode::UNAUTHORIZED,
            [
                (header::WWW_AUTHENTICATE, "Basic realm=\"lockwatch\""),
                (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            ],
            "401 Unauthorized: this path needs basic auth (the web config's basic_auth_users)\n",
        )
            .into_response(),
    };
    for (name, value) in &auth.headers {
        response.headers_mut().insert(name.clone(), value.clone());
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_auth(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::try_from(value).unwrap());
        h
    }

    #[test]
    fn basic_credentials_are_decoded_and_other_schemes_ignored() {
        let encoded = base64::engine::general_purpose::STANDARD.encode("prom:pa:ss");
        assert_eq!(
            basic_credentials(&with_auth(&format!("Basic {encoded}"))),
            Some(("prom".to_string(), "pa:ss".to_string()))
        );
        assert_eq!(
            basic_credentials(&with_auth(&format!("basic {encoded}"))).map(|c| c.0),
            Some("prom".into())
        );
        assert_eq!(basic_credentials(&with_auth(&format!("Bearer {encoded}"))), None);
        assert_eq!(basic_credentials(&with_auth("Basic !!!")), None);
        assert_eq!(basic_credentials(&HeaderMap::new()), None);
    }
}
