#!/usr/bin/env bash
# Render the generated manifests of deploy/kubernetes/ from the shipped files:
#   prometheusrule.yaml  `lockwatch rules --format prometheus-operator` for the default thresholds
#   dashboards.yaml      dashboards/*.json as ConfigMaps labelled for the Grafana sidecar
# tests/kubernetes.rs fails when they differ from what this script writes.
set -euo pipefail
cd "$(dirname "$0")/.."
out=deploy/kubernetes
defaults=$(mktemp)
trap 'rm -f "$defaults"' EXIT
printf '[[target]]\nname = "main"\nurl = "redis://127.0.0.1:6379/0"\n' >"$defaults"
cargo run --quiet --locked -- rules -c "$defaults" --format prometheus-operator >"$out/prometheusrule.yaml"

{
  echo "# Rendered by scripts/kubernetes.sh from dashboards/: the Grafana dashboards as ConfigMaps"
  echo "# for the Grafana sidecar (label grafana_dashboard: \"1\"). Edit dashboards/, then render again."
  for f in dashboards/*.json; do
    name=$(basename "$f" .json)
    echo "---"
    echo "apiVersion: v1"
    echo "kind: ConfigMap"
    echo "metadata:"
    echo "  name: $name-dashboard"
    echo "  labels:"
    echo "    app.kubernetes.io/name: lockwatch"
    echo "    grafana_dashboard: \"1\""
    echo "data:"
    echo "  $name.json: |"
    sed 's/^/    /' "$f"
    echo
  done
} >"$out/dashboards.yaml"
echo "wrote $out/prometheusrule.yaml and $out/dashboards.yaml" >&2
