//! `deploy/kubernetes/`: every manifest parses and the kustomization names them all; the
//! Deployment, Service and ServiceMonitor agree on labels, port and paths, and the Deployment
//! mounts what its config reads (config from the generated ConfigMap, the Redis password from
//! a Secret through `password_file`); the PrometheusRule is `lockwatch rules --format
//! prometheus-operator` (drift), its groups are the rule files' and pass `promtool check
//! rules`; the dashboard ConfigMaps hold `dashboards/` byte for byte; the optional drill
//! CronJob runs the exporter's image against its Service with the least privilege a cgroup
//! freeze needs, and names the generated config and the image as the Deployment does (so
//! kustomize rewrites both alike once it is added; no kubectl: Debian does not ship one).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use lockwatch::config::{Config, Overrides};
use serde_yaml_ng::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const BIN: &str = env!("CARGO_BIN_EXE_lockwatch");
const DEFAULTS: &str = "[[target]]\nname = \"main\"\nurl = \"redis://127.0.0.1:6379/0\"\n";
const RENDER: &str = "render it again with scripts/kubernetes.sh";
const DRILL_CRONJOB: &str = "drill-cronjob.yaml";

fn dir() -> PathBuf {
    Path::new(ROOT).join("deploy/kubernetes")
}

/// The documents of a YAML file.
fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// Every resource of the kustomization, by kind and name.
fn resources() -> BTreeMap<(String, String), Value> {
    let k = &documents(&dir().join("kustomization.yaml"))[0];
    let mut out = BTreeMap::new();
    for file in k["resources"].as_sequence().unwrap() {
        for doc in documents(&dir().join(file.as_str().unwrap())) {
            let key = (
                doc["kind"].as_str().unwrap().to_string(),
                doc["metadata"]["name"].as_str().unwrap().to_string(),
            );
            assert!(doc["apiVersion"].is_string(), "{key:?}");
            assert!(out.insert(key.clone(), doc).is_none(), "{key:?} twice");
        }
    }
    out
}

/// A container's mounts: volume name → mount path.
fn mounts(c: &Value) -> BTreeMap<&str, &str> {
    c["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|m| (m["name"].as_str().unwrap(), m["mountPath"].as_str().unwrap()))
        .collect()
}

/// A YAML list of strings.
fn strings(v: &Value) -> Vec<&str> {
    v.as_sequence().unwrap().iter().map(|s| s.as_str().unwrap()).collect()
}

fn get<'a>(r: &'a BTreeMap<(String, String), Value>, kind: &str, name: &str) -> &'a Value {
    r.get(&(kind.to_string(), name.to_string()))
        .unwrap_or_else(|| panic!("no {kind} {name} in the kustomization"))
}

#[test]
fn the_kustomization_names_every_manifest_and_they_fit_together() {
    let k = &documents(&dir().join("kustomization.yaml"))[0];
    let listed = strings(&k["resources"]);
    for entry in std::fs::read_dir(dir()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        // The drill's CronJob names one team's worker: optional, added by those who use it.
        if name.ends_with(".yaml") && name != "kustomization.yaml" && name != DRILL_CRONJOB {
            assert!(listed.contains(&name.as_str()), "{name} is not in kustomization.yaml");
        }
    }
    let r = resources();
    let generated = &k["configMapGenerator"][0];
    let config_map = generated["name"].as_str().unwrap();
    let config_file = generated["files"][0].as_str().unwrap();

    let d = get(&r, "Deployment", "lockwatch");
    let pod = &d["spec"]["template"];
    let labels = &pod["metadata"]["labels"];
    assert_eq!(&d["spec"]["selector"]["matchLabels"], labels);
    let spec = &pod["spec"];
    assert_eq!(spec["securityContext"]["runAsNonRoot"], Value::Bool(true));

    // The HA pair: two replicas on different nodes, updated and disrupted one at a time,
    // rolled when the generated ConfigMap's content (hence its name) changes.
    assert_eq!(d["spec"]["replicas"].as_u64(), Some(2));
    assert_eq!(
        d["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"].as_u64(),
        Some(1)
    );
    let anti = &spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(anti["topologyKey"].as_str(), Some("kubernetes.io/hostname"));
    assert_eq!(&anti["labelSelector"]["matchLabels"], labels);
    let pdb = get(&r, "PodDisruptionBudget", "lockwatch");
    assert_eq!(&pdb["spec"]["selector"]["matchLabels"], labels);
    assert_eq!(pdb["spec"]["minAvailable"].as_u64(), Some(1));
    assert!(
        k["generatorOptions"]["disableNameSuffixHash"].is_null() && generated["options"].is_null(),
        "the ConfigMap's name must carry its content hash, so a config change rolls the pods"
    );
    let c = &spec["containers"][0];
    let port = &c["ports"][0];
    assert_eq!(
        (port["name"].as_str(), port["containerPort"].as_u64()),
        (Some("metrics"), Some(9747))
    );
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        assert_eq!(c[probe]["httpGet"]["path"].as_str(), Some(path), "{probe}");
        assert_eq!(c[probe]["httpGet"]["port"].as_str(), Some("metrics"), "{probe}");
    }
    for r in ["requests", "limits"] {
        assert!(c["resources"][r]["memory"].is_string(), "resources.{r}.memory");
    }
    let sc = &c["securityContext"];
    assert_eq!(sc["allowPrivilegeEscalation"], Value::Bool(false));
    assert_eq!(sc["readOnlyRootFilesystem"], Value::Bool(true));
    assert_eq!(sc["capabilities"]["drop"][0].as_str(), Some("ALL"));

    // Volumes: where each is mounted, and what backs it.
    let mounts = mounts(c);
    let volume = |name: &str| {
        spec["volumes"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|v| v["name"].as_str() == Some(name))
            .unwrap_or_else(|| panic!("no volume {name}"))
            .clone()
    };
    assert_eq!(volume("config")["configMap"]["name"].as_str(), Some(config_map));
    let args = strings(&c["args"]);
    let config_path = format!("{}/{config_file}", mounts["config"]);
    assert!(
        args.windows(2).any(|w| w == ["--config", config_path.as_str()]),
        "{args:?}"
    );
    let secret = volume("redis-password")["secret"]["secretName"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        !r.contains_key(&("Secret".to_string(), secret.clone())),
        "no Secret value is shipped"
    );

    // The config in the ConfigMap loads, reads its password from the Secret's mount and
    // keeps its state on the state volume.
    let text = std::fs::read_to_string(dir().join(config_file)).unwrap();
    let password_file = text
        .lines()
        .find_map(|l| l.strip_prefix("password_file = "))
        .expect("the target reads its password from a file")
        .trim_matches('"');
    assert!(
        password_file.starts_with(&format!("{}/", mounts["redis-password"])),
        "{password_file}"
    );
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("password"), "secret\n").unwrap();
    let text = text.replace(password_file, tmp.path().join("password").to_str().unwrap());
    let config = Config::from_toml(&text, config_file, &dir(), &Overrides::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.state_dir.as_deref(), Some(Path::new(mounts["state"])));
    assert_eq!(config.server.listen.port(), 9747);

    // Service → pods, ServiceMonitor → Service, by labels and the port's name.
    let svc = get(&r, "Service", "lockwatch");
    assert_eq!(&svc["spec"]["selector"], labels);
    assert_eq!(svc["spec"]["ports"][0]["name"].as_str(), Some("metrics"));
    assert_eq!(svc["spec"]["ports"][0]["targetPort"].as_str(), Some("metrics"));
    let sm = get(&r, "ServiceMonitor", "lockwatch");
    for (k, v) in sm["spec"]["selector"]["matchLabels"].as_mapping().unwrap() {
        assert_eq!(&svc["metadata"]["labels"][k.as_str().unwrap()], v);
    }
    let endpoint = &sm["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"].as_str(), Some("metrics"));
    assert_eq!(endpoint["path"].as_str(), Some("/metrics"));
}

#[test]
fn the_prometheus_rule_is_the_rendered_rules_and_passes_promtool() {
    let config = Config::from_toml(DEFAULTS, "d.toml", Path::new("."), &Overrides::default()).unwrap();
    let files = lockwatch::rules::render(&config);
    let on_disk = std::fs::read_to_string(dir().join("prometheusrule.yaml")).unwrap();
    assert!(
        on_disk == files.prometheus_rule,
        "deploy/kubernetes/prometheusrule.yaml differs from `lockwatch rules --format prometheus-operator`: {RENDER}"
    );
    // The command prints the same, and writes it with --out.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("c.toml"), DEFAULTS).unwrap();
    let run = |extra: &[&str]| {
        let out = Command::new(BIN)
            .args(["rules", "-c", "c.toml", "--format", "prometheus-operator"])
            .args(extra)
            .current_dir(tmp.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", common::output_text(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(run(&[]), on_disk);
    run(&["--out", "out"]);
    let written = std::fs::read_to_string(tmp.path().join("out").join(lockwatch::rules::PROMETHEUS_RULE_FILE)).unwrap();
    assert_eq!(written, on_disk);

    // Its groups are the shipped rule files' groups.
    let rule = &documents(&dir().join("prometheusrule.yaml"))[0];
    assert_eq!(rule["apiVersion"].as_str(), Some("monitoring.coreos.com/v1"));
    assert_eq!(rule["kind"].as_str(), Some("PrometheusRule"));
    let groups = rule["spec"]["groups"].as_sequence().unwrap();
    let mut shipped = Vec::new();
    for f in [lockwatch::rules::RECORDING_FILE, lockwatch::rules::ALERTS_FILE] {
        let doc = &documents(&Path::new(ROOT).join("alerts").join(f))[0];
        shipped.extend(doc["groups"].as_sequence().unwrap().iter().cloned());
    }
    assert_eq!(groups, &shipped);

    // As a rule file, promtool takes them all.
    let count: usize = groups.iter().map(|g| g["rules"].as_sequence().unwrap().len()).sum();
    let mut file = serde_yaml_ng::Mapping::new();
    file.insert("groups".into(), Value::Sequence(groups.clone()));
    let path = tmp.path().join("from-prometheusrule.yml");
    std::fs::write(&path, serde_yaml_ng::to_string(&file).unwrap()).unwrap();
    let promtool = common::require_binary("promtool", "prometheus");
    let out = Command::new(promtool)
        .args(["check", "rules", "--lint=all", "--lint-fatal", path.to_str().unwrap()])
        .output()
        .unwrap();
    let text = common::output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&format!("SUCCESS: {count} rules found")), "{text}");
}

#[test]
fn the_dashboard_config_maps_hold_the_dashboards_for_the_grafana_sidecar() {
    let docs = documents(&dir().join("dashboards.yaml"));
    let shipped: Vec<String> = {
        let mut v: Vec<String> = std::fs::read_dir(Path::new(ROOT).join("dashboards"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".json"))
            .collect();
        v.sort();
        v
    };
    assert_eq!(docs.len(), shipped.len(), "one ConfigMap per dashboard: {RENDER}");
    for (doc, name) in docs.iter().zip(&shipped) {
        assert_eq!(doc["kind"].as_str(), Some("ConfigMap"));
        assert_eq!(
            doc["metadata"]["labels"]["grafana_dashboard"].as_str(),
            Some("1"),
            "{name}"
        );
        let data = doc["data"].as_mapping().unwrap();
        assert_eq!(data.len(), 1, "{name}");
        let json = doc["data"][name.as_str()]
            .as_str()
            .unwrap_or_else(|| panic!("no data.{name}: {RENDER}"));
        let file = std::fs::read_to_string(Path::new(ROOT).join("dashboards").join(name)).unwrap();
        assert!(
            json == file,
            "the ConfigMap of {name} differs from dashboards/{name}: {RENDER}"
        );
    }
}

#[test]
fn the_drill_cronjob_freezes_with_least_privilege_and_fits_the_kustomization() {
    let docs = documents(&dir().join(DRILL_CRONJOB));
    assert_eq!(docs.len(), 1, "one CronJob");
    let cron = &docs[0];
    assert_eq!(cron["apiVersion"].as_str(), Some("batch/v1"));
    assert_eq!(cron["kind"].as_str(), Some("CronJob"));
    let spec = &cron["spec"];
    assert!(
        spec["schedule"]
            .as_str()
            .is_some_and(|s| s.split_whitespace().count() == 5)
    );
    assert_eq!(spec["concurrencyPolicy"].as_str(), Some("Forbid"));
    assert!(spec["startingDeadlineSeconds"].as_u64().is_some());
    let job = &spec["jobTemplate"]["spec"];
    assert_eq!(
        job["backoffLimit"].as_u64(),
        Some(0),
        "a drill is never retried blindly"
    );
    assert!(
        job["activeDeadlineSeconds"]
            .as_u64()
            .is_some_and(|s| s > 0 && s <= 3600)
    );
    let pod = &job["template"]["spec"];
    assert_eq!(pod["restartPolicy"].as_str(), Some("Never"));
    assert_eq!(pod["automountServiceAccountToken"], Value::Bool(false));
    assert_eq!(
        pod["hostPID"],
        Value::Bool(true),
        "the worker's /proc is read by host PID"
    );
    for absent in ["hostNetwork", "hostIPC"] {
        assert!(pod[absent].is_null() || pod[absent] == Value::Bool(false), "{absent}");
    }
    let containers = pod["containers"].as_sequence().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];

    // The exporter's image, and its Service by name and port.
    let r = resources();
    let d = get(&r, "Deployment", "lockwatch");
    assert_eq!(c["image"], d["spec"]["template"]["spec"]["containers"][0]["image"]);
    let svc = get(&r, "Service", "lockwatch");
    let port = svc["spec"]["ports"][0]["port"].as_u64().unwrap();
    let args = strings(&c["args"]);
    assert_eq!(args[0], "drill");
    let flag = |name: &str| {
        args.windows(2)
            .find(|w| w[0] == name)
            .map(|w| w[1])
            .unwrap_or_else(|| panic!("no {name} in {args:?}"))
    };
    assert_eq!(flag("--exporter"), format!("http://lockwatch:{port}"));
    assert!(flag("--freeze").starts_with("cgroup:"), "{args:?}");
    for f in ["--for", "--name", "--namespace"] {
        assert!(!flag(f).is_empty(), "{f}");
    }
    assert!(args.contains(&"--yes"), "{args:?}");
    // The config is the exporter's (the same ConfigMap, the same password Secret).
    let mounts = mounts(c);
    let volumes: BTreeMap<&str, &Value> = pod["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| (v["name"].as_str().unwrap(), v))
        .collect();
    assert_eq!(flag("--config"), format!("{}/lockwatch.toml", mounts["config"]));
    assert_eq!(
        volumes["config"]["configMap"]["name"].as_str(),
        Some("lockwatch-config")
    );
    assert_eq!(
        volumes["redis-password"]["secret"]["secretName"],
        d["spec"]["template"]["spec"]["volumes"][1]["secret"]["secretName"]
    );

    // Least privilege: never privileged, every capability dropped but SYS_PTRACE, no
    // escalation, a read-only root; of the node, only the pods' cgroups, where the freeze
    // path points.
    let sc = &c["securityContext"];
    assert_ne!(sc["privileged"], Value::Bool(true), "never privileged");
    assert_eq!(sc["allowPrivilegeEscalation"], Value::Bool(false));
    assert_eq!(sc["readOnlyRootFilesystem"], Value::Bool(true));
    assert_eq!(strings(&sc["capabilities"]["drop"]), ["ALL"]);
    assert_eq!(strings(&sc["capabilities"]["add"]), ["SYS_PTRACE"]);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"].as_str(),
        Some("RuntimeDefault")
    );
    let host_paths: Vec<(&str, &str)> = volumes
        .iter()
        .filter_map(|(name, v)| Some((*name, v["hostPath"]["path"].as_str()?)))
        .collect();
    assert_eq!(host_paths.len(), 1, "{host_paths:?}");
    let (cgroup_volume, host_path) = host_paths[0];
    assert!(
        host_path.starts_with("/sys/fs/cgroup/") && host_path.len() > "/sys/fs/cgroup/".len(),
        "only part of the cgroup fs: {host_path}"
    );
    let cgroup_mount = mounts[cgroup_volume];
    assert!(!cgroup_mount.starts_with("/sys"), "{cgroup_mount}");
    let env = c["env"].as_sequence().unwrap();
    let worker = env
        .iter()
        .find(|e| e["name"].as_str() == Some("WORKER_CGROUP"))
        .unwrap();
    assert!(worker["valueFrom"]["configMapKeyRef"]["name"].is_string());
    assert_eq!(flag("--freeze"), "cgroup:$(WORKER_CGROUP)");

    // Added to the kustomization, kustomize rewrites both the same way: the CronJob names the
    // config the kustomization generates and the image it sets, as the Deployment does.
    let r = resources();
    let deployment = &get(&r, "Deployment", "lockwatch")["spec"]["template"]["spec"];
    let config_of = |pod: &Value| {
        pod["volumes"]
            .as_sequence()
            .unwrap()
            .iter()
            .find_map(|v| v["configMap"]["name"].as_str().map(str::to_string))
            .unwrap()
    };
    let k = &documents(&dir().join("kustomization.yaml"))[0];
    let generated = k["configMapGenerator"][0]["name"].as_str().unwrap();
    assert_eq!(config_of(pod), generated);
    assert_eq!(config_of(deployment), generated);
    let image = |pod: &Value| pod["containers"][0]["image"].as_str().unwrap().to_string();
    assert_eq!(image(pod), image(deployment));
    assert_eq!(image(pod), k["images"][0]["name"].as_str().unwrap());
}
