//! Secrets the config points at (Redis passwords, the push token): `Secret`, which never
//! prints its value, and `read_secret`, which reads one from a file. Where each secret comes
//! from (file, override, environment) is decided by the section that needs it.

use std::fmt;
use std::path::Path;

/// A secret read from a file or the environment. Never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub(crate) fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Read a secret file: surrounding whitespace (a trailing newline) is not part of it.
pub(super) fn read_secret(path: &Path) -> Result<Secret, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let s = text.trim();
    if s.is_empty() {
        return Err(format!("{} is empty", path.display()));
    }
    Ok(Secret::new(s))
}
