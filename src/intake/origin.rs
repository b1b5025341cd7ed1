//! Who wrote a keyed lock event, as far as the record and its source tell: the file it was
//! read from (device, inode and path), and the process id, host name and OpenTelemetry
//! `service.instance.id` the record carried. Kept beside the key in the history ring, so
//! the freeze drill can tell the frozen worker's refusals from another holder's; never a
//! label. Each text is cut to [`TEXT_MAX`] bytes.

use std::sync::Arc;

/// Host names and instance ids are cut to this many bytes.
pub const TEXT_MAX: usize = 64;
/// A file's path is kept to this many bytes (it is shown; the device and inode identify it).
pub const PATH_MAX: usize = 256;

/// Field names a record gives its process id by: `pid` (pino, bunyan), OpenTelemetry's
/// `process.pid`, `process` (Python's `%(process)d`), Serilog's `ProcessId`.
pub const PID_FIELDS: &[&str] = &["pid", "process.pid", "process_id", "processId", "ProcessId", "process"];
/// Field names of the host: `hostname` (pino, bunyan), `host.name` (OpenTelemetry, ECS),
/// Serilog's `MachineName` (not a bare `host`: often the peer a request went to).
pub const HOST_FIELDS: &[&str] = &["hostname", "host.name", "MachineName"];
/// OpenTelemetry's resource attribute naming one running instance of a service (as a Loki
/// label, `service_instance_id`).
pub const INSTANCE_FIELDS: &[&str] = &["service.instance.id", "service_instance_id"];

/// The file a record was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    pub dev: u64,
    pub ino: u64,
    pub path: Arc<str>,
}

/// A file being read, borrowed: made a [`LogFile`] only for an event that keeps it.
#[derive(Debug, Clone, Copy)]
pub struct FileRef<'a> {
    pub dev: u64,
    pub ino: u64,
    pub path: &'a std::path::Path,
}

impl FileRef<'_> {
    pub fn owned(&self) -> LogFile {
        LogFile {
            dev: self.dev,
            ino: self.ino,
            path: cut(&self.path.to_string_lossy(), PATH_MAX).into(),
        }
    }
}

/// Where a keyed event came from; every part may be unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    pub file: Option<LogFile>,
    pub pid: Option<u32>,
    pub host: Option<Box<str>>,
    pub instance: Option<Box<str>>,
}

impl Origin {
    /// From the text values of a record's fields (any of them absent).
    pub fn of(pid: Option<&str>, host: Option<&str>, instance: Option<&str>) -> Origin {
        Origin {
            file: None,
            pid: pid.and_then(|p| p.trim().parse().ok()),
            host: host
                .map(|h| cut(h.trim(), TEXT_MAX))
                .filter(|h| !h.is_empty())
                .map(Into::into),
            instance: instance
                .map(|i| cut(i.trim(), TEXT_MAX))
                .filter(|i| !i.is_empty())
                .map(Into::into),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.file.is_none() && self.pid.is_none() && self.host.is_none() && self.instance.is_none()
    }
}

/// `s` cut to `max` bytes at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_become_an_origin_bounded() {
        let long = "h".repeat(200);
        let o = Origin::of(Some(" 4242 "), Some(&long), Some(""));
        assert_eq!(o.pid, Some(4242));
        assert_eq!(o.host.as_deref().map(str::len), Some(TEXT_MAX));
        assert_eq!(o.instance, None);
        assert_eq!(Origin::of(Some("worker-3"), None, None).pid, None, "a name is no pid");
        assert!(Origin::default().is_empty());
        let cut = Origin::of(None, Some(&"é".repeat(40)), None);
        assert!(cut.host.is_some_and(|h| h.len() <= TEXT_MAX && h.len() >= TEXT_MAX - 1));
    }
}
