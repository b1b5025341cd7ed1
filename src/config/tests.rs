use super::server::parse_listen;
use super::*;

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml(text, "t.toml", Path::new("/nonexistent"), &Overrides::default())
}

fn err(text: &str) -> String {
    load(text).unwrap_err().to_string()
}

const TARGET: &str = "[[target]]\nname = \"main\"\nurl = \"redis://127.0.0.1:6379/0\"\n";

#[test]
fn the_design_example_loads_with_defaults() {
    let cfg = load(&format!(
        "{TARGET}
[[namespace]]
name = \"workflow\"
pattern = \"cordum:wf:run:lock:*\"
ttl = \"30s\"
renew_every = \"10s\"
max_hold = \"15m\"
value = \"json:owner.id\"
fence_pattern = \"cordum:wf:run:fence:*\"
log_phrases = [\"Run Lock\"]
"
    ))
    .unwrap();
    let t = &cfg.targets[0];
    assert_eq!(t.sample_interval, Duration::from_secs(5));
    assert_eq!(t.sample_budget, Duration::from_secs(2));
    assert_eq!(t.scan_count, 500);
    assert_eq!(t.notifications, Notifications::Auto);
    assert_eq!(cfg.server.listen, "0.0.0.0:9747".parse().unwrap());
    let ns = &cfg.namespaces[0];
    assert_eq!(ns.value, ValueKind::Json(vec!["owner".into(), "id".into()]));
    assert_eq!(ns.renew_grace, Duration::from_secs(5));
    assert_eq!(ns.overdue_below(), Some(Duration::from_secs(15)));
    assert_eq!(ns.log_phrases, vec!["run lock".to_string()]);
}

#[test]
fn the_shared_sample_config_loads() {
    let text = include_str!("../../tests/fixtures/lockwatch.toml");
    let cfg = load(text).unwrap();
    assert_eq!(cfg.namespaces.len(), 4);
    assert_eq!(cfg.logs.len(), 1);
}

#[test]
fn unknown_key_names_key_and_line() {
    let e = err(&format!("{TARGET}sample_intervl = \"5s\"\n"));
    assert!(e.contains("line 4"), "{e}");
    assert!(e.contains("sample_intervl"), "{e}");
}

#[test]
fn bad_duration_names_key_and_line() {
    let e = err(&format!(
        "{TARGET}[[namespace]]\nname = \"a\"\npattern = \"a:*\"\nttl = \"30\"\n"
    ));
    assert!(
        e.starts_with("t.toml line 7: namespace[0].ttl: `30` is not a duration"),
        "{e}"
    );
}

#[test]
fn bad_glob_is_refused() {
    let e = err(&format!(
        "{TARGET}[[namespace]]\nname = \"a\"\npattern = \"a:[x*\"\nttl = \"3s\"\n"
    ));
    assert!(
        e.contains("line 6: namespace[0].pattern: bad glob `a:[x*`: unterminated"),
        "{e}"
    );
}

#[test]
fn duplicate_namespace_is_refused() {
    let ns = "[[namespace]]\nname = \"a\"\npattern = \"a:*\"\nttl = \"3s\"\n";
    let e = err(&format!(
        "{TARGET}{ns}[[namespace]]\nname = \"a\"\npattern = \"b:*\"\nttl = \"3s\"\n"
    ));
    assert!(
        e.contains("line 9: namespace[1].name: duplicate namespace name `a`"),
        "{e}"
    );
}

#[test]
fn overlapping_patterns_are_refused_with_an_example_key() {
    let e = err(&format!(
        "{TARGET}[[namespace]]\nname = \"a\"\npattern = \"job:*\"\nttl = \"3s\"\n[[namespace]]\nname = \"b\"\npattern = \"*:lock\"\nttl = \"3s\"\n"
    ));
    assert!(e.contains("line 10: namespace[1].pattern"), "{e}");
    assert!(e.contains("e.g. `job:lock`"), "{e}");
}

#[test]
fn fence_pattern_overlapping_a_lock_pattern_is_refused() {
    let e = err(&format!(
        "{TARGET}[[namespace]]\nname = \"a\"\npattern = \"job:*\"\nttl = \"3s\"\nfence_pattern = \"job:fence:*\"\n"
    ));
    assert!(e.contains("namespace[0].fence_pattern"), "{e}");
}

#[test]
fn renew_every_must_be_shorter_than_ttl() {
    let e = err(&format!(
        "{TARGET}[[namespace]]\nname = \"a\"\npattern = \"a:*\"\nttl = \"10s\"\nrenew_every = \"10s\"\n"
    ));
    assert!(
        e.contains("namespace[0].renew_every: 10s is not shorter than ttl (10s)"),
        "{e}"
    );
}

#[test]
fn unreadable_password_file_is_refused_without_leaking() {
    let e = err(&format!("{TARGET}password_file = \"missing-secret\"\n"));
    assert!(
        e.contains("line 4: target[0].password_file: cannot read /nonexistent/missing-secret"),
        "{e}"
    );
}

#[test]
fn password_comes_from_file_and_is_never_displayed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pw"), "s3cret\n").unwrap();
    let text = format!("{TARGET}password_file = \"pw\"\n");
    let cfg = Config::from_toml(&text, "t.toml", dir.path(), &Overrides::default()).unwrap();
    assert_eq!(cfg.targets[0].connection.redis_settings().password(), Some("s3cret"));
    assert!(!format!("{cfg:?}").contains("s3cret"));
    assert!(!cfg.targets[0].display_url.contains("s3cret"));
}

#[test]
fn env_password_applies_and_url_password_is_redacted() {
    let ov = Overrides {
        redis_password: Some(Secret::new("fromenv")),
        redis_url: Some("redis://:inurl@10.0.0.1:6380/2".into()),
        ..Overrides::default()
    };
    let cfg = Config::from_toml("", "t.toml", Path::new("."), &ov).unwrap();
    let t = &cfg.targets[0];
    assert_eq!(t.name, "main");
    assert_eq!(t.connection.redis_settings().password(), Some("fromenv"));
    assert_eq!(t.display_url, "redis://:***@10.0.0.1:6380/2");
}

#[test]
fn redis_url_override_refuses_several_targets() {
    let ov = Overrides {
        redis_url: Some("redis://x".into()),
        ..Overrides::default()
    };
    let text = format!("{TARGET}[[target]]\nname = \"b\"\nurl = \"redis://y\"\n");
    let e = Config::from_toml(&text, "t.toml", Path::new("."), &ov)
        .unwrap_err()
        .to_string();
    assert!(e.contains("--redis-url"), "{e}");
}

#[test]
fn no_target_is_an_error() {
    assert!(err("").contains("no [[target]] configured"));
}

#[test]
fn budget_longer_than_interval_is_refused() {
    let e = err(&format!("{TARGET}sample_interval = \"1s\"\nsample_budget = \"2s\"\n"));
    assert!(e.contains("line 5: target[0].sample_budget"), "{e}");
}

#[test]
fn reserved_and_invalid_names_are_refused() {
    let e = err(&format!(
        "{TARGET}[[namespace]]\nname = \"unknown\"\npattern = \"a:*\"\nttl = \"3s\"\n"
    ));
    assert!(e.contains("reserved"), "{e}");
    let e = err(&format!(
        "{TARGET}[[namespace]]\nname = \"a b\"\npattern = \"a:*\"\nttl = \"3s\"\n"
    ));
    assert!(e.contains("not a valid name"), "{e}");
}

#[test]
fn bad_value_kind_and_rule_are_refused() {
    let e = err(&format!(
        "{TARGET}[[namespace]]\nname = \"a\"\npattern = \"a:*\"\nttl = \"3s\"\nvalue = \"json:\"\n"
    ));
    assert!(e.contains("namespace[0].value"), "{e}");
    let e = err(&format!(
        "{TARGET}[[rule]]\nmatch = \"x\"\nop = \"steal\"\noutcome = \"ok\"\n"
    ));
    assert!(e.contains("rule[0].op: `steal` is not one of"), "{e}");
    let e = err(&format!(
        "{TARGET}[[rule]]\nmatch = \"(\"\nop = \"release\"\noutcome = \"ok\"\n"
    ));
    assert!(e.contains("rule[0].match: bad regex"), "{e}");
}

#[test]
fn missing_key_and_wrong_type_name_the_key() {
    let e = err(&format!("{TARGET}[[namespace]]\nname = \"a\"\npattern = \"a:*\"\n"));
    assert!(e.contains("schema: missing field `ttl`"), "{e}");
    let e = err(&format!("{TARGET}scan_count = \"many\"\n"));
    assert!(e.contains("line 4: scan_count: invalid type"), "{e}");
}

#[test]
fn syntax_error_names_line() {
    let e = err("[[target]\nname = 1\n");
    assert!(e.starts_with("t.toml line 1: syntax:"), "{e}");
}

#[test]
fn listen_accepts_port_only_form() {
    assert_eq!(parse_listen(":9747"), Some("0.0.0.0:9747".parse().unwrap()));
    assert_eq!(parse_listen("localhost:1"), Some("127.0.0.1:1".parse().unwrap()));
    assert_eq!(parse_listen("nope"), None);
}

#[test]
fn trace_url_is_a_checked_template() {
    let with = |t: &str| format!("[server]\ntrace_url = \"{t}\"\n{TARGET}");
    let c = load(&with("https://tempo.example/explore?trace={trace_id}&span={span_id}")).unwrap();
    let trace = crate::metrics::TraceContext::new("4bf92f3577b34da6a3ce929d0e0e4736", None).unwrap();
    assert_eq!(
        c.server.trace_url.unwrap().link(&trace),
        "https://tempo.example/explore?trace=4bf92f3577b34da6a3ce929d0e0e4736&span="
    );
    assert!(load(&with("")).unwrap().server.trace_url.is_none());
    for (bad, says) in [
        ("javascript:alert({trace_id})", "must start with http:// or https://"),
        ("https://jaeger.example/trace/", "has no {trace_id}"),
        ("https://x/{trace_id}/{user}", "{trace_id} and {span_id} only"),
    ] {
        let e = err(&with(bad));
        assert!(
            e.starts_with("t.toml line 2: server.trace_url:") && e.contains(says),
            "{e}"
        );
    }
}

#[test]
fn redact_url_hides_passwords_only() {
    assert_eq!(redact_url("redis://user:pw@h:1/0"), "redis://user:***@h:1/0");
    assert_eq!(redact_url("redis://h:1/0"), "redis://h:1/0");
    assert_eq!(redact_url("rediss://:pw@h"), "rediss://:***@h");
    assert_eq!(
        redact_url("redis+unix:///run/redis.sock?db=1&pass=s3cret"),
        "redis+unix:///run/redis.sock?db=1&pass=***"
    );
}

#[test]
fn logs_sources_are_checked() {
    let logs = |body: &str| err(&format!("{TARGET}[[logs]]\n{body}"));
    let e = logs("name = \"push\"\npath = \"/var/log/*.log\"\n");
    assert!(e.contains("logs[0].name") && e.contains("POST /api/v1/events"), "{e}");
    let e = logs("name = \"otlp\"\npath = \"/var/log/*.log\"\n");
    assert!(e.contains("logs[0].name") && e.contains("POST /v1/logs"), "{e}");
    let e = logs("name = \"a\"\npath = \"/var/log/[.log\"\n");
    assert!(e.contains("logs[0].path") && e.contains("not a valid glob"), "{e}");
    let e = err(&format!(
        "{TARGET}[[logs]]\nname = \"a\"\npath = \"-\"\n[[logs]]\nname = \"b\"\npath = \"-\"\n"
    ));
    assert!(e.contains("logs[1].path") && e.contains("only one"), "{e}");
}

#[test]
fn rotated_files_are_followed_five_minutes_by_default_and_the_keys_are_checked() {
    let cfg = load(&format!(
        "{TARGET}[[logs]]\nname = \"a\"\npath = \"/var/log/app/*.log\"\n"
    ))
    .unwrap();
    assert_eq!(cfg.logs[0].rotated_grace, std::time::Duration::from_secs(300));
    assert_eq!(cfg.logs[0].rotated_grace, DEFAULT_ROTATED_GRACE);
    assert_eq!(cfg.logs[0].rotated, None);
    let cfg = load(&format!(
        "{TARGET}[[logs]]\nname = \"a\"\npath = \"app.log\"\nrotated = \"archive/*/app.log*\"\nrotated_grace = \"90s\"\n"
    ))
    .unwrap();
    assert_eq!(cfg.logs[0].rotated_grace, std::time::Duration::from_secs(90));
    // Relative to the config file, as `path` is.
    assert_eq!(cfg.logs[0].rotated.as_deref(), Some("/nonexistent/archive/*/app.log*"));
    let logs = |body: &str| {
        err(&format!(
            "{TARGET}[[logs]]\nname = \"a\"\npath = \"/var/log/*.log\"\n{body}"
        ))
    };
    assert_eq!(
        logs("rotated_grace = \"500ms\"\n"),
        "t.toml line 7: logs[0].rotated_grace: 500ms is out of range 1s..=1d"
    );
    assert_eq!(
        logs("rotated_grace = \"2d\"\n"),
        "t.toml line 7: logs[0].rotated_grace: 2d is out of range 1s..=1d"
    );
    assert!(logs("rotated_grace = \"5\"\n").contains("is not a duration"));
    assert_eq!(
        logs("rotated = \"/var/log/[old\"\n"),
        "t.toml line 7: logs[0].rotated: not a valid glob: Pattern syntax error near position 9: invalid range pattern"
    );
    let e = err(&format!(
        "{TARGET}[[logs]]\nname = \"a\"\npath = \"-\"\nrotated_grace = \"1m\"\n"
    ));
    assert_eq!(e, "t.toml line 7: logs[0].rotated_grace: stdin (`-`) is never rotated");
}

#[test]
fn alert_thresholds_default_and_override_per_namespace() {
    let cfg = load(&format!(
        "{TARGET}[alerts]\nmin_bad_events = 3\nrunbook_base_url = \"https://wiki.example.org/rb/\"\n\
         [[namespace]]\nname = \"a\"\npattern = \"a:*\"\nttl = \"5s\"\n[namespace.alerts]\nnot_owned_budget = 0.05\n\
         [[namespace]]\nname = \"b\"\npattern = \"b:*\"\nttl = \"5s\"\n"
    ))
    .unwrap();
    assert_eq!(cfg.alerts.runbook_base_url, "https://wiki.example.org/rb");
    assert_eq!(cfg.alerts.defaults.min_bad_events, 3);
    assert_eq!(cfg.namespaces[0].alerts.not_owned_budget, 0.05);
    assert_eq!(cfg.namespaces[0].alerts.min_bad_events, 3);
    assert_eq!(cfg.namespaces[1].alerts, cfg.alerts.defaults);
    assert_eq!(load(TARGET).unwrap().alerts, AlertsConfig::default());
}

#[test]
fn bad_alert_settings_name_key_and_line() {
    let e = err(&format!("{TARGET}[alerts]\nnot_owned_budget = 1.5\n"));
    assert!(
        e.contains("line 5") && e.contains("alerts.not_owned_budget") && e.contains("between 0 and 1"),
        "{e}"
    );
    let e = err(&format!(
        "{TARGET}[[namespace]]\nname = \"a\"\npattern = \"a:*\"\nttl = \"5s\"\n[namespace.alerts]\nmin_takeovers = 0\n"
    ));
    assert!(
        e.contains("namespace[0].alerts.min_takeovers") && e.contains("at least 1"),
        "{e}"
    );
    let e = err(&format!("{TARGET}[alerts]\ndashboard_base_url = \"grafana:3000\"\n"));
    assert!(
        e.contains("alerts.dashboard_base_url") && e.contains("http(s) URL"),
        "{e}"
    );
    let e = err(&format!("{TARGET}[alerts]\njob = \"a b\"\n"));
    assert!(e.contains("alerts.job"), "{e}");
    let e = err(&format!("{TARGET}[alerts]\nmin_bad_event = 3\n"));
    assert!(e.contains("min_bad_event"), "{e}");
    let e = err(&format!("{TARGET}[alerts]\nheadroom_fraction = 1.0\n"));
    assert!(
        e.contains("alerts.headroom_fraction") && e.contains("between 0 and 1"),
        "{e}"
    );
}

#[test]
fn headroom_thresholds_default_and_override_per_namespace() {
    let cfg = load(&format!(
        "{TARGET}[alerts]\nnear_miss_budget = 0.02\n\
         [[namespace]]\nname = \"a\"\npattern = \"a:*\"\nttl = \"5s\"\n[namespace.alerts]\nheadroom_fraction = 0.5\n"
    ))
    .unwrap();
    let defaults = crate::config::Thresholds::default();
    assert_eq!(cfg.alerts.defaults.headroom_fraction, defaults.headroom_fraction);
    assert_eq!(cfg.alerts.defaults.near_miss_budget, 0.02);
    assert_eq!(cfg.namespaces[0].alerts.headroom_fraction, 0.5);
    assert_eq!(cfg.namespaces[0].alerts.near_miss_budget, 0.02);
}

#[test]
fn drill_max_age_defaults_to_eight_days_and_is_set_per_namespace() {
    let cfg = load(&format!(
        "{TARGET}[alerts]\ndrill_max_age = \"2d\"\n\
         [[namespace]]\nname = \"a\"\npattern = \"a:*\"\nttl = \"5s\"\n[namespace.alerts]\ndrill_max_age = \"36h\"\n\
         [[namespace]]\nname = \"b\"\npattern = \"b:*\"\nttl = \"5s\"\n"
    ))
    .unwrap();
    let day = std::time::Duration::from_secs(86_400);
    assert_eq!(crate::config::Thresholds::default().drill_max_age, 8 * day);
    assert_eq!(load(TARGET).unwrap().alerts.defaults.drill_max_age, 8 * day);
    assert_eq!(cfg.alerts.defaults.drill_max_age, 2 * day);
    assert_eq!(cfg.namespaces[0].alerts.drill_max_age, 36 * day / 24);
    assert_eq!(cfg.namespaces[1].alerts.drill_max_age, 2 * day);
    let e = err(&format!("{TARGET}[alerts]\ndrill_max_age = \"30s\"\n"));
    assert!(
        e.contains("alerts.drill_max_age") && e.contains("shorter than a minute"),
        "{e}"
    );
    let e = err(&format!(
        "{TARGET}[[namespace]]\nname = \"a\"\npattern = \"a:*\"\nttl = \"5s\"\n[namespace.alerts]\ndrill_max_age = \"a week\"\n"
    ));
    assert!(e.contains("namespace[0].alerts.drill_max_age"), "{e}");
    let e = err(&format!("{TARGET}[alerts]\ndrill_max_age = \"0s\"\n"));
    assert!(
        e.contains("alerts.drill_max_age") && e.contains("greater than zero"),
        "{e}"
    );
}

#[test]
fn contention_threshold_is_high_by_default_and_set_per_namespace() {
    let cfg = load(&format!(
        "{TARGET}[alerts]\nmin_contention_timeouts = 300\n\
         [[namespace]]\nname = \"a\"\npattern = \"a:*\"\nttl = \"5s\"\n[namespace.alerts]\nmin_contention_timeouts = 20\n\
         [[namespace]]\nname = \"b\"\npattern = \"b:*\"\nttl = \"5s\"\n"
    ))
    .unwrap();
    assert_eq!(crate::config::Thresholds::default().min_contention_timeouts, 100);
    assert_eq!(cfg.alerts.defaults.min_contention_timeouts, 300);
    assert_eq!(cfg.namespaces[0].alerts.min_contention_timeouts, 20);
    assert_eq!(cfg.namespaces[1].alerts.min_contention_timeouts, 300);
    let e = err(&format!("{TARGET}[alerts]\nmin_contention_timeouts = 0\n"));
    assert!(
        e.contains("alerts.min_contention_timeouts") && e.contains("at least 1"),
        "{e}"
    );
}

#[test]
fn bad_choices_name_key_line_and_the_allowed_words() {
    let e = err(&format!("{TARGET}notifications = \"xyz\"\n"));
    assert_eq!(
        e,
        "t.toml line 4: target[0].notifications: `xyz` is not one of auto, require, off, configure"
    );
    let logs = |body: &str| {
        err(&format!(
            "{TARGET}[[logs]]\nname = \"a\"\npath = \"/var/log/*.log\"\n{body}"
        ))
    };
    assert_eq!(
        logs("format = \"yaml\"\n"),
        "t.toml line 7: logs[0].format: `yaml` is not one of auto, json, logfmt, text"
    );
    assert_eq!(
        logs("start_at = \"Beginning\"\n"),
        "t.toml line 7: logs[0].start_at: `Beginning` is not one of end, beginning"
    );
    assert_eq!(
        logs("multiline = \"on\"\n"),
        "t.toml line 7: logs[0].multiline: `on` is not one of auto, off"
    );
}

#[test]
fn choices_are_read_from_the_file() {
    let cfg = load(&format!(
        "{TARGET}notifications = \"configure\"\n[[logs]]\nname = \"a\"\npath = \"-\"\nformat = \"logfmt\"\nstart_at = \"beginning\"\nmultiline = \"off\"\n"
    ))
    .unwrap();
    assert_eq!(cfg.targets[0].notifications, Notifications::Configure);
    assert_eq!(cfg.logs[0].format, LogFormat::Logfmt);
    assert_eq!(cfg.logs[0].start_at, StartAt::Beginning);
    assert_eq!(cfg.logs[0].multiline, Multiline::Off);
    let cfg = load(&format!("{TARGET}[[logs]]\nname = \"a\"\npath = \"-\"\n")).unwrap();
    assert_eq!(cfg.logs[0].multiline, Multiline::Auto);
}

const TLS_TARGET: &str = "[[target]]\nname = \"main\"\nurl = \"rediss://127.0.0.1:6380/0\"\n";

fn load_in(dir: &Path, text: &str) -> Result<Config, ConfigError> {
    Config::from_toml(text, "t.toml", dir, &Overrides::default())
}

#[test]
fn tls_keys_need_a_rediss_url() {
    for key in [
        "tls_ca_file = \"ca.pem\"",
        "tls_cert_file = \"c.pem\"",
        "tls_server_name = \"redis.test\"",
    ] {
        let e = err(&format!("{TARGET}{key}\n"));
        let name = key.split(' ').next().unwrap();
        assert!(
            e.contains(&format!(
                "line 4: target[0].{name}: TLS settings need a rediss:// url, and the url is redis://127.0.0.1:6379/0"
            )),
            "{e}"
        );
    }
    // The same through --redis-url: the key is still named.
    let ov = Overrides {
        redis_url: Some("redis://10.0.0.1/0".into()),
        ..Overrides::default()
    };
    let e = Config::from_toml(
        &format!("{TLS_TARGET}tls_ca_file = \"ca.pem\"\n"),
        "t.toml",
        Path::new("."),
        &ov,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("line 4: target[0].tls_ca_file: TLS settings need a rediss:// url"),
        "{e}"
    );
}

#[test]
fn tls_client_certificate_and_key_go_together() {
    let e = err(&format!("{TLS_TARGET}tls_cert_file = \"c.pem\"\n"));
    assert!(
        e.contains(
            "line 4: target[0].tls_cert_file: tls_key_file is missing: a client certificate needs its private key"
        ),
        "{e}"
    );
    let e = err(&format!("{TLS_TARGET}tls_key_file = \"k.pem\"\n"));
    assert!(
        e.contains("target[0].tls_key_file: tls_cert_file is missing: a client key needs its certificate"),
        "{e}"
    );
}

#[test]
fn tls_files_must_be_readable_pem_relative_to_the_config() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("garbage.pem"), "not a certificate\n").unwrap();
    std::fs::write(dir.path().join("broken.pem"), "-----BEGIN CERTIFICATE-----\nMIIB\n").unwrap();
    std::fs::write(
        dir.path().join("junk-der.pem"),
        "-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("key.pem"),
        "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1ieXRlcw==\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let d = dir.path().display();
    let cases = [
        (
            "tls_ca_file = \"missing.pem\"",
            format!("line 4: target[0].tls_ca_file: cannot read {d}/missing.pem"),
        ),
        (
            "tls_ca_file = \"garbage.pem\"",
            format!("line 4: target[0].tls_ca_file: {d}/garbage.pem holds no PEM certificate"),
        ),
        (
            "tls_ca_file = \"broken.pem\"",
            format!("line 4: target[0].tls_ca_file: {d}/broken.pem is not valid PEM: a section has no END line"),
        ),
        (
            "tls_ca_file = \"junk-der.pem\"",
            format!("line 4: target[0].tls_ca_file: certificate 1 in {d}/junk-der.pem is not a usable CA certificate"),
        ),
        (
            "tls_cert_file = \"garbage.pem\"\ntls_key_file = \"key.pem\"",
            format!("line 4: target[0].tls_cert_file: {d}/garbage.pem holds no PEM certificate"),
        ),
        (
            "tls_cert_file = \"junk-der.pem\"\ntls_key_file = \"garbage.pem\"",
            format!("line 5: target[0].tls_key_file: {d}/garbage.pem: no PEM private key in it"),
        ),
        (
            "tls_cert_file = \"junk-der.pem\"\ntls_key_file = \"key.pem\"",
            format!("line 5: target[0].tls_key_file: {d}/key.pem: not a usable private key"),
        ),
    ];
    for (keys, expected) in cases {
        let e = load_in(dir.path(), &format!("{TLS_TARGET}{keys}\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(&expected), "{keys}: expected `{expected}` in: {e}");
        assert!(!e.contains("c2VjcmV0"), "the key's content is never quoted: {e}");
    }
}

#[test]
fn tls_server_name_must_be_the_urls_host() {
    let e = err(&format!("{TLS_TARGET}tls_server_name = \"redis.test\"\n"));
    assert!(
        e.contains(
            "line 4: target[0].tls_server_name: verifying the certificate against `redis.test` while connecting to `127.0.0.1` is not supported"
        ),
        "{e}"
    );
    assert!(e.contains("write `redis.test` as the url's host"), "{e}");
    let e = err(&format!("{TLS_TARGET}tls_server_name = \"not a name\"\n"));
    assert!(e.contains("`not a name` is not a DNS name or IP address"), "{e}");
    let cfg = load(&format!("{TLS_TARGET}tls_server_name = \"127.0.0.1\"\n")).unwrap();
    assert!(cfg.targets[0].tls.ca.is_none() && cfg.targets[0].tls.client.is_none());
}

#[test]
fn reconcile_keys_have_defaults_and_bounds() {
    let ns = "[[namespace]]\nname = \"a\"\npattern = \"a:*\"\nttl = \"3s\"\n";
    let c = load(&format!("{TARGET}{ns}")).unwrap();
    assert_eq!(c.targets[0].reconcile_interval, Duration::from_secs(600));
    assert_eq!(c.targets[0].reconcile_rate, 2000);
    let c = load(&format!(
        "{TARGET}reconcile_interval = \"1m\"\nreconcile_rate = 50\n{ns}"
    ))
    .unwrap();
    assert_eq!(c.targets[0].reconcile_interval, Duration::from_secs(60));
    assert_eq!(c.targets[0].reconcile_rate, 50);
    assert_eq!(
        err(&format!("{TARGET}reconcile_rate = 5\n{ns}")),
        "t.toml line 4: target[0].reconcile_rate: 5 is out of range 10..=10000000 (keys per second)"
    );
    assert!(
        err(&format!("{TARGET}reconcile_interval = \"0s\"\n{ns}"))
            .starts_with("t.toml line 4: target[0].reconcile_interval: must be greater than zero"),
        "zero interval"
    );
}

#[test]
fn http_limits_have_defaults_and_bounds() {
    let c = load(TARGET).unwrap();
    assert_eq!(c.server.limits, HttpLimits::default());
    assert_eq!(c.server.limits.max_connections, 256);
    let c = load(&format!(
        "[server]\nmax_connections = 64\nheader_timeout = \"2s\"\nbody_timeout = \"5s\"\nidle_timeout = \"1m\"\n{TARGET}"
    ))
    .unwrap();
    let want = HttpLimits {
        max_connections: 64,
        header_timeout: Duration::from_secs(2),
        body_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(60),
    };
    assert_eq!(c.server.limits, want);
    assert_eq!(
        err(&format!("[server]\nmax_connections = 10\n{TARGET}")),
        "t.toml line 2: server.max_connections: 10 is out of range 64..=65536"
    );
    assert!(
        err(&format!("[server]\nidle_timeout = \"0s\"\n{TARGET}"))
            .starts_with("t.toml line 2: server.idle_timeout: must be greater than zero"),
    );
    assert!(
        err(&format!("[server]\nheader_timeout = \"soon\"\n{TARGET}"))
            .starts_with("t.toml line 2: server.header_timeout:")
    );
}

const NS: &str = "[[namespace]]\nname = \"jobs\"\npattern = \"j:lock:*\"\nttl = \"30s\"\n";

#[test]
fn cluster_and_sentinel_targets_load() {
    let cfg = load(&format!(
        "[[target]]\nname = \"c\"\nmode = \"cluster\"\nnodes = [\"redis://:pw@10.0.0.1:7000\", \"redis://10.0.0.2:7000\"]\n\n\
         [[target]]\nname = \"s\"\nmode = \"sentinel\"\nsentinels = [\"redis://10.0.0.5:26379\"]\nmaster_name = \"mymaster\"\nurl = \"redis://app@ignored:1/2\"\n\n{NS}"
    ))
    .unwrap();
    let Topology::Cluster { seeds } = &cfg.targets[0].topology else {
        panic!("not a cluster")
    };
    assert_eq!(seeds.len(), 2);
    assert_eq!(cfg.targets[0].connection.redis_settings().password(), Some("pw"));
    assert!(
        !cfg.targets[0].display_url.contains("pw"),
        "{}",
        cfg.targets[0].display_url
    );
    let Topology::Sentinel(s) = &cfg.targets[1].topology else {
        panic!("not sentinel")
    };
    assert_eq!(s.master_name, "mymaster");
    assert_eq!(cfg.targets[1].connection.redis_settings().db(), 2);
    assert_eq!(cfg.targets[1].topology.mode(), Mode::Sentinel);
}

#[test]
fn a_cluster_target_may_watch_another_database_named_by_every_seed() {
    let text = "[[target]]\nname = \"a\"\nmode = \"cluster\"\nnodes = [\"redis://h:1/2\", \"redis://h:2/2\"]\n\n\
                [[namespace]]\nname = \"n\"\npattern = \"n:*\"\nttl = \"30s\"\n";
    let c = load(text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.targets[0].connection.redis_settings().db(), 2);
    let Topology::Cluster { seeds } = &c.targets[0].topology else {
        panic!("a cluster")
    };
    assert!(seeds.iter().all(|s| s.redis_settings().db() == 2));
}

#[test]
fn topology_keys_are_checked_with_key_and_line() {
    let cases = [
        (
            "[[target]]\nname = \"a\"\nurl = \"redis://h:1\"\nnodes = [\"redis://h:2\"]\n",
            "line 4: target[0].nodes: only for mode = \"cluster\" (this target's mode is \"standalone\")",
        ),
        (
            "[[target]]\nname = \"a\"\nmode = \"cluster\"\nsentinels = [\"redis://h:2\"]\nnodes = [\"redis://h:1\"]\n",
            "line 4: target[0].sentinels: only for mode = \"sentinel\"",
        ),
        (
            "[[target]]\nname = \"a\"\nmode = \"sentinel\"\nsentinels = [\"redis://h:2\"]\n",
            "line 2: target[0].master_name: missing",
        ),
        (
            "[[target]]\nname = \"a\"\nmode = \"sentinel\"\nmaster_name = \"m\"\n",
            "target[0].sentinels: missing",
        ),
        (
            "[[target]]\nname = \"a\"\nmode = \"cluster\"\n",
            "line 2: target[0].nodes: missing",
        ),
        (
            "[[target]]\nname = \"a\"\nmode = \"cluster\"\nnodes = [\"redis://h:1/3\", \"redis://h:2/1\"]\n",
            "line 4: target[0].nodes[1]: names database 1 (redis://h:2/1), and target[0].nodes[0] names database 3 (redis://h:1/3): a cluster target watches one database",
        ),
        (
            "[[target]]\nname = \"a\"\nmode = \"cluster\"\nnodes = [\"redis://h:1\", \"rediss://h:2\"]\n",
            "target[0].nodes: mixes redis:// and rediss:// seeds",
        ),
        (
            "[[target]]\nname = \"a\"\nmode = \"ring\"\nurl = \"redis://h:1\"\n",
            "line 3: target[0].mode: `ring` is not one of standalone, cluster, sentinel",
        ),
        ("[[target]]\nname = \"a\"\n", "line 2: target[0].url: missing"),
        (
            "[[target]]\nname = \"a\"\nmode = \"sentinel\"\nmaster_name = \"m\"\nsentinels = [\"redis://h:2\"]\nsentinel_password_file = \"nope\"\n",
            "line 6: target[0].sentinel_password_file:",
        ),
    ];
    for (target, expected) in cases {
        let e = err(&format!("{target}\n{NS}"));
        assert!(e.contains(expected), "expected `{expected}` in: {e}");
    }
}

#[test]
fn redis_cli_is_told_tls_and_an_unverified_certificate() {
    let target = |url: &str, extra: &str| {
        load(&format!(
            "[[target]]\nname = \"m\"\nurl = \"{url}\"\n{extra}\n[[namespace]]\nname = \"wf\"\npattern = \"wf:*\"\nttl = \"30s\"\n"
        ))
        .unwrap()
        .targets
        .remove(0)
    };
    let plain = target("redis://h:6379/0", "");
    assert_eq!((plain.cli_tls(true), plain.cli_tls(false)), ("", ""));
    let tls = target("rediss://h:6379/0", "");
    assert_eq!((tls.cli_tls(true), tls.cli_tls(false)), ("", "--tls "));
    let unverified = target("rediss://h:6379/0", "tls_insecure_skip_verify = true");
    assert_eq!(
        (unverified.cli_tls(true), unverified.cli_tls(false)),
        ("--insecure ", "--tls --insecure ")
    );
}
