//! The words every part of lockwatch shares, and nothing else: what an application did
//! with a lock (`Op`), how it ended (`Outcome`) and whether that is the lock working,
//! contention or a failure (`EventClass`), what Redis did to a lock key (`Transition`,
//! `HoldEnd`), when a holder's TTL left was measured (`HeadroomAt`), why a key is not a
//! readable lock (`Unreadable`), what a log line was (`LineResult`), why a push was refused
//! (`Refused`) and why a drill's record was (`DrillRefused`), the reserved label values and the
//! metric names.
//!
//! It depends on nothing else in the crate. Each label enum is a closed set of label values.

use std::fmt;
use std::str::FromStr;

/// Declares a closed set of label values with `ALL`, `index` (position in `ALL`),
/// `as_str`, `Display` and a `FromStr` whose error lists the allowed values.
macro_rules! label_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident => $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vm])* $v),+ }

        impl $name {
            pub const ALL: [$name; [$($s),+].len()] = [$($name::$v),+];
            /// Position in `ALL`.
            pub fn index(self) -> usize {
                self as usize
            }
            pub fn as_str(self) -> &'static str {
                match self { $($name::$v => $s),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownValue;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $name::ALL.iter().copied().find(|v| v.as_str() == s).ok_or_else(|| UnknownValue {
                    given: s.to_string(),
                    allowed: $name::ALL.map($name::as_str).join(", "),
                })
            }
        }
    };
}

label_enum!(
    /// Why a push endpoint refused a body (`reason` label): nothing of it was counted.
    Refused {
        /// No or a wrong push token (401).
        Unauthorized => "unauthorized",
        /// A content type or encoding not taken (415).
        Unsupported => "unsupported",
        /// Over the size limit, before or after decompression (413).
        TooLarge => "too_large",
        /// Corrupt compression, malformed protobuf, the wrong JSON shape (400).
        Undecodable => "undecodable",
        /// Every push slot taken (503).
        Busy => "busy",
        /// The body did not arrive within `body_timeout` (408).
        Timeout => "timeout",
    }
);

label_enum!(
    /// Why the exporter refused a record a drill sent (`reason` of
    /// `lockwatch_drill_records_refused_total`): nothing of it was kept.
    DrillRefused {
        /// Bad JSON, a field missing or of the wrong shape, a bad id, a text too long (400).
        Invalid => "invalid",
        /// A target the config does not name (404).
        UnknownTarget => "unknown_target",
        /// A namespace the config does not name (404).
        UnknownNamespace => "unknown_namespace",
        /// A new freeze while as many as the exporter keeps are live already (429).
        TooMany => "too_many",
        /// A body over the size limit (413).
        TooLarge => "too_large",
        /// No or a wrong push token (401).
        Unauthorized => "unauthorized",
        /// A content type other than JSON (415).
        Unsupported => "unsupported",
        /// Every push slot taken (503).
        Busy => "busy",
        /// The body did not arrive within `body_timeout` (503).
        Timeout => "timeout",
    }
);

label_enum!(
    /// What the application tried to do with a lock (`op` label of lock events).
    Op {
        Acquire => "acquire",
        Release => "release",
        Renew => "renew",
        Write => "write",
    }
);

label_enum!(
    /// How it ended (`outcome` label of lock events).
    Outcome {
        Ok => "ok",
        NotOwned => "not_owned",
        Busy => "busy",
        Timeout => "timeout",
        Error => "error",
        StaleFence => "stale_fence",
    }
);

/// What a lock event says of the lock: the lock working (`Ok`), the lock working while
/// others hold it (`Contention`), or the lock failing its holder (`Failure`).
///
/// Contention is an acquisition that found the lock held (`busy`) or gave up waiting for it
/// (`timeout`): workers politely waiting, counted apart and never a failure. A failure is
/// every other outcome that is not `ok`: `not_owned`, `stale_fence` and `error` of any
/// operation, and `busy` or `timeout` of a renewal, release or write (a renewal that did not
/// go through leaves the holder's lock to expire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventClass {
    Ok,
    Contention,
    Failure,
}

impl EventClass {
    /// The class of an event of `op` ending in `outcome`.
    pub fn of(op: Op, outcome: Outcome) -> EventClass {
        match (op, outcome) {
            (_, Outcome::Ok) => EventClass::Ok,
            (Op::Acquire, Outcome::Busy | Outcome::Timeout) => EventClass::Contention,
            _ => EventClass::Failure,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            EventClass::Ok => "ok",
            EventClass::Contention => "contention",
            EventClass::Failure => "failure",
        }
    }
}

label_enum!(
    /// A state change Redis performed on a lock key (`kind` of `lockwatch_lock_transitions_total`).
    Transition {
        Acquired => "acquired",
        Released => "released",
        Renewed => "renewed",
        Expired => "expired",
        /// The maxmemory policy dropped a held lock.
        Evicted => "evicted",
    }
);

label_enum!(
    /// How a hold ended (`end` of `lockwatch_lock_hold_duration_seconds`).
    HoldEnd {
        Released => "released",
        Expired => "expired",
    }
);

label_enum!(
    /// When a holder's remaining TTL was measured (`at` of `lockwatch_lock_ttl_headroom_seconds`
    /// and `lockwatch_lock_near_misses_total`).
    HeadroomAt {
        Renewal => "renewal",
        Release => "release",
    }
);

label_enum!(
    /// Why a key in a lock namespace could not be read as a lock (`reason` of
    /// `lockwatch_locks_unreadable`).
    Unreadable {
        /// The key's Redis type does not fit the namespace's `value` (a hash where a string is expected…).
        WrongType => "wrong_type",
        /// The type fits but the owner cannot be read from it (JSON without the field…).
        BadValue => "bad_value",
    }
);

label_enum!(
    /// How a target's locks are found (`mode` of `lockwatch_tracking_mode`).
    TrackingMode {
        /// From keyspace notifications; SCAN only reconciles.
        Events => "events",
        /// By SCAN passes over the namespaces' patterns.
        Scan => "scan",
    }
);

label_enum!(
    /// Whether a target's keyspace notifications are shown to arrive (`state` of
    /// `lockwatch_notifications_verification`); events mode only while `verified`.
    Verification {
        /// Shown to arrive (by the `method` of `lockwatch_notifications_verification_method`).
        Verified => "verified",
        /// Subscribed; the first proof (a canary round, or lock notifications) under way.
        Pending => "pending",
        /// No subscription: the connection failed, or no primary is known.
        NotSubscribed => "not_subscribed",
        /// The server refused `PSUBSCRIBE` (an ACL without the channels, a provider without pub/sub).
        PubsubRefused => "pubsub_refused",
        /// `CONFIG GET` shows `notify-keyspace-events` lacking flags lockwatch needs.
        FlagsMissing => "flags_missing",
        /// A canary round came short of events: the flags (or the path) lose some.
        EventsMissing => "events_missing",
        /// Repairs of lock changes, and not one notification in a check interval.
        Silent => "silent",
    }
);

label_enum!(
    /// How a target's notifications are verified (`method` of
    /// `lockwatch_notifications_verification_method`).
    Method {
        /// A canary key of lockwatch's own, written every interval, whose events must arrive.
        Canary => "canary",
        /// The canary write is refused: the flags `CONFIG GET` reads.
        Flags => "flags",
        /// Neither: lock notifications that reads agree with.
        Passive => "passive",
    }
);

label_enum!(
    /// What a reconciling SCAN found that the events had missed (`kind` of
    /// `lockwatch_reconcile_repairs_total`).
    Repair {
        /// A lock key present in Redis that events had not announced.
        Missing => "missing",
        /// A tracked lock key that no longer exists, with no event saying so.
        Gone => "gone",
        /// A tracked lock whose owner or expiry differs from what events said.
        Changed => "changed",
    }
);

label_enum!(
    /// What a log line turned out to be (`result` of `lockwatch_log_lines_total`).
    LineResult {
        Matched => "matched",
        Ignored => "ignored",
        Malformed => "malformed",
    }
);

/// A value outside the vocabulary; the message lists what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{given}` is not one of {allowed}")]
pub struct UnknownValue {
    pub given: String,
    pub allowed: String,
}

/// Namespace label value for everything that matches no configured namespace.
pub const UNKNOWN_NAMESPACE: &str = "unknown";

/// The `source` label of lines and events pushed to `POST /api/v1/events`; no `[[logs]]`
/// may take this name.
pub const PUSH_SOURCE: &str = "push";
/// The `source` label of records sent to `POST /v1/logs` (OTLP/HTTP).
pub const OTLP_SOURCE: &str = "otlp";
/// The `source` label of entries sent to `POST /loki/api/v1/push`.
pub const LOKI_SOURCE: &str = "loki";
/// The `source` label of records sent to `POST /api/v1/logs` (a shipper's `http` output).
pub const HTTP_SOURCE: &str = "http";
/// Every push endpoint's `source` label, one per protocol; no `[[logs]]` may take these.
pub const PUSH_SOURCES: [&str; 4] = [PUSH_SOURCE, OTLP_SOURCE, LOKI_SOURCE, HTTP_SOURCE];
/// The path each of `PUSH_SOURCES` is posted to, in the same order.
pub const PUSH_PATHS: [&str; 4] = ["/api/v1/events", "/v1/logs", "/loki/api/v1/push", "/api/v1/logs"];

/// Where a drill reports its freezes (`POST`); a push endpoint, guarded like them.
pub const DRILL_FREEZES_PATH: &str = "/api/v1/drills/freezes";
/// Where a drill records its result (`POST`); a push endpoint, guarded like them.
pub const DRILLS_PATH: &str = "/api/v1/drills";
/// The verdicts a recorded drill can have, the values of `lockwatch_drill_verdict`'s
/// `verdict` label (a state set).
pub const DRILL_VERDICTS: [&str; 4] = ["safe", "unsafe", "not_exercised", "interrupted"];

/// The names of every metric family lockwatch exports (DESIGN.md fixes them).
pub mod metric {
    // The sampler's, labels target + namespace.
    pub const LOCKS_HELD: &str = "lockwatch_locks_held";
    pub const LOCKS_WITHOUT_TTL: &str = "lockwatch_locks_without_ttl";
    pub const LOCKS_RENEWAL_OVERDUE: &str = "lockwatch_locks_renewal_overdue";
    pub const LOCKS_HELD_TOO_LONG: &str = "lockwatch_locks_held_too_long";
    pub const LOCK_HELD_MAX_SECONDS: &str = "lockwatch_lock_held_max_seconds";
    pub const LOCK_TTL_REMAINING_SECONDS: &str = "lockwatch_lock_ttl_remaining_seconds";
    pub const LOCK_HANDOFFS_TOTAL: &str = "lockwatch_lock_handoffs_total";
    pub const FENCE_TOKEN: &str = "lockwatch_fence_token";
    pub const FENCE_REGRESSIONS_TOTAL: &str = "lockwatch_fence_regressions_total";
    pub const LOCKS_UNREADABLE: &str = "lockwatch_locks_unreadable";
    // The sampler's, label target.
    pub const UP: &str = "lockwatch_up";
    pub const SAMPLE_DURATION_SECONDS: &str = "lockwatch_sample_duration_seconds";
    pub const SAMPLE_ERRORS_TOTAL: &str = "lockwatch_sample_errors_total";
    pub const SAMPLE_TRUNCATED_TOTAL: &str = "lockwatch_sample_truncated_total";
    pub const SAMPLE_PASSES_TOTAL: &str = "lockwatch_sample_passes_total";
    pub const KEYS_SCANNED_TOTAL: &str = "lockwatch_keys_scanned_total";
    pub const TRACKING_MODE: &str = "lockwatch_tracking_mode";
    pub const RECONCILE_REPAIRS_TOTAL: &str = "lockwatch_reconcile_repairs_total";
    pub const LOCKS_LOST_IN_FAILOVER_TOTAL: &str = "lockwatch_locks_lost_in_failover_total";
    // The topology follower's.
    pub const NODES: &str = "lockwatch_nodes";
    pub const NODE_UP: &str = "lockwatch_node_up";
    pub const FAILOVERS_TOTAL: &str = "lockwatch_failovers_total";
    pub const TARGET_INFO: &str = "lockwatch_target_info";
    pub const TARGET_TLS_UNVERIFIED: &str = "lockwatch_target_tls_unverified";
    // The lifecycle watcher's.
    pub const LOCK_TRANSITIONS_TOTAL: &str = "lockwatch_lock_transitions_total";
    pub const LOCK_EXPIRY_TAKEOVERS_TOTAL: &str = "lockwatch_lock_expiry_takeovers_total";
    pub const LOCK_HOLD_DURATION_SECONDS: &str = "lockwatch_lock_hold_duration_seconds";
    pub const LOCK_TTL_HEADROOM_SECONDS: &str = "lockwatch_lock_ttl_headroom_seconds";
    pub const LOCK_RENEWAL_INTERVAL_SECONDS: &str = "lockwatch_lock_renewal_interval_seconds";
    pub const LOCK_NEAR_MISSES_TOTAL: &str = "lockwatch_lock_near_misses_total";
    pub const NOTIFICATIONS_CONNECTED: &str = "lockwatch_notifications_connected";
    pub const NOTIFICATIONS_RECEIVED_TOTAL: &str = "lockwatch_notifications_received_total";
    pub const OWNER_READS_SKIPPED_TOTAL: &str = "lockwatch_owner_reads_skipped_total";
    pub const LIFECYCLE_TRACKED_LOCKS: &str = "lockwatch_lifecycle_tracked_locks";
    pub const NOTIFICATIONS_SUBSCRIBED: &str = "lockwatch_notifications_subscribed";
    pub const NOTIFICATIONS_VERIFICATION: &str = "lockwatch_notifications_verification";
    pub const NOTIFICATIONS_VERIFICATION_METHOD: &str = "lockwatch_notifications_verification_method";
    // The HTTP server's.
    pub const HTTP_CONNECTIONS: &str = "lockwatch_http_connections";
    pub const HTTP_CONNECTIONS_CLOSED_TOTAL: &str = "lockwatch_http_connections_closed_total";
    pub const HTTP_ACCEPT_ERRORS_TOTAL: &str = "lockwatch_http_accept_errors_total";
    // The intake's.
    pub const LOCK_EVENTS_TOTAL: &str = "lockwatch_lock_events_total";
    pub const LOG_LINES_TOTAL: &str = "lockwatch_log_lines_total";
    pub const LOG_FILES: &str = "lockwatch_log_files";
    pub const LOG_FILES_NOT_REOPENED: &str = "lockwatch_log_files_not_reopened";
    pub const LOG_PUSHES_REFUSED_TOTAL: &str = "lockwatch_log_pushes_refused_total";
    // What drills report.
    pub const DRILL_FROZEN: &str = "lockwatch_drill_frozen";
    pub const DRILL_THAW_DUE_TIMESTAMP_SECONDS: &str = "lockwatch_drill_thaw_due_timestamp_seconds";
    pub const DRILL_RECORDS_REFUSED_TOTAL: &str = "lockwatch_drill_records_refused_total";
    // What recorded drills found, labels target + namespace + drill.
    pub const DRILL_VERDICT: &str = "lockwatch_drill_verdict";
    pub const DRILL_VERDICT_STREAK: &str = "lockwatch_drill_verdict_streak";
    pub const DRILL_LAST_RUN_TIMESTAMP_SECONDS: &str = "lockwatch_drill_last_run_timestamp_seconds";
    pub const DRILL_RUNS_TOTAL: &str = "lockwatch_drill_runs_total";
    pub const DRILL_EXPOSURE_SECONDS: &str = "lockwatch_drill_exposure_seconds";
    // lockwatch itself.
    pub const BUILD_INFO: &str = "lockwatch_build_info";
    pub const CONFIG_LAST_RELOAD_SUCCESSFUL: &str = "lockwatch_config_last_reload_successful";
    pub const CONFIG_LAST_RELOAD_SUCCESS_TIMESTAMP_SECONDS: &str =
        "lockwatch_config_last_reload_success_timestamp_seconds";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_lists_allowed_values() {
        for op in Op::ALL {
            assert_eq!(op.as_str().parse::<Op>(), Ok(op));
        }
        for o in Outcome::ALL {
            assert_eq!(o.as_str().parse::<Outcome>(), Ok(o));
        }
        for (i, op) in Op::ALL.iter().enumerate() {
            assert_eq!(op.index(), i);
        }
        for (i, o) in Outcome::ALL.iter().enumerate() {
            assert_eq!(o.index(), i);
        }
        for (i, t) in Transition::ALL.iter().enumerate() {
            assert_eq!(t.index(), i);
        }
        let err = "steal".parse::<Op>().unwrap_err();
        assert_eq!(err.to_string(), "`steal` is not one of acquire, release, renew, write");
    }

    #[test]
    fn contention_is_an_acquisition_that_found_the_lock_held_or_gave_up() {
        use EventClass::{Contention, Failure};
        // Of the 24 pairs: the 4 `ok` ones succeed, two are contention, the rest fail.
        let count = |class: EventClass| {
            Op::ALL
                .iter()
                .flat_map(|op| Outcome::ALL.map(|o| EventClass::of(*op, o)))
                .filter(|c| *c == class)
                .count()
        };
        assert_eq!((count(EventClass::Ok), count(Contention), count(Failure)), (4, 2, 18));
        assert_eq!(EventClass::of(Op::Acquire, Outcome::Busy), Contention);
        assert_eq!(EventClass::of(Op::Acquire, Outcome::Timeout), Contention);
        assert_eq!(EventClass::of(Op::Acquire, Outcome::Error), Failure);
        assert_eq!(EventClass::of(Op::Acquire, Outcome::NotOwned), Failure);
        assert_eq!(EventClass::of(Op::Release, Outcome::NotOwned), Failure);
        assert_eq!(EventClass::of(Op::Renew, Outcome::Timeout), Failure, "a failed renewal");
        assert_eq!(EventClass::of(Op::Renew, Outcome::Busy), Failure, "a failed renewal");
        assert_eq!(EventClass::of(Op::Release, Outcome::Timeout), Failure);
        assert_eq!(EventClass::of(Op::Write, Outcome::StaleFence), Failure);
        assert_eq!(EventClass::of(Op::Renew, Outcome::Ok), EventClass::Ok);
    }
}
