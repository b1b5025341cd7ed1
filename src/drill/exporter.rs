//! The exporter as a drill speaks to it: a path of the `--exporter` URL, its credentials
//! (basic auth from the URL, or a push token read from `--push-token-file` when sending, so
//! it never shows in a command line), and a JSON post asked again while the exporter is busy
//! or restarting (a connection refused, 5xx).

use std::path::Path;
use std::time::Duration;

/// The push token held in `file`, trimmed.
pub(crate) fn token(file: &Path) -> Result<String, String> {
    std::fs::read_to_string(file)
        .map(|t| t.trim().to_string())
        .map_err(|e| format!("{}: {e}", file.display()))
}

/// A path of the exporter: a client, the URL without credentials, and those it had.
pub(crate) struct Endpoint {
    pub(crate) http: reqwest::Client,
    pub(crate) url: reqwest::Url,
    user: String,
    pass: Option<String>,
}

impl Endpoint {
    pub(crate) fn new(exporter: &str, path: &str, timeout: Duration) -> Result<Endpoint, String> {
        let mut url = reqwest::Url::parse(exporter).map_err(|e| format!("`{exporter}`: {e}"))?;
        let (user, pass) = (url.username().to_string(), url.password().map(str::to_string));
        let _ = url.set_username("");
        let _ = url.set_password(None);
        url.set_path(path);
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Endpoint { http, url, user, pass })
    }

    /// The URL's credentials, if it had any.
    pub(crate) fn basic_auth(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self.user.is_empty() {
            true => req,
            false => req.basic_auth(&self.user, self.pass.as_deref()),
        }
    }

    /// POST `body` as JSON with the push `token` (else the URL's credentials), asked again
    /// after 0.5, 1 and 2 s while the exporter cannot answer or is busy (5xx): the answer's body,
    /// or the last status and body (or error) in a line.
    pub(crate) async fn post(&self, body: &impl serde::Serialize, token: Option<&str>) -> Result<String, String> {
        let mut last = String::new();
        for pause in [0, 500, 1000, 2000] {
            tokio::time::sleep(Duration::from_millis(pause)).await;
            let req = self.http.post(self.url.clone()).json(body);
            let req = match &token {
                Some(t) => req.bearer_auth(t),
                None => self.basic_auth(req),
            };
            match req.send().await {
                Ok(resp) if resp.status().is_success() => return Ok(resp.text().await.unwrap_or_default()),
                Ok(resp) => {
                    let status = resp.status();
                    let text = resp.text().await.unwrap_or_default();
                    last = format!("{status}: {}", text.trim().chars().take(300).collect::<String>());
                    // 429 is a lasting refusal (no room for one more freeze or drill); a busy
                    // exporter answers 503.
                    if !status.is_server_error() {
                        break;
                    }
                }
                Err(e) => last = e.to_string(),
            }
        }
        Err(last)
    }
}
