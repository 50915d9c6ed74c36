#!/usr/bin/env bash
# Checks the alerts (docs/runbook.md) and the Grafana dashboard
# (docs/monitoring.md): the kustomize monitoring component's PrometheusRule
# and dashboard ConfigMap are what hack/update-alerts.sh makes of the chart's
# files/alerts.rules.yaml and files/dashboard.json; the dashboard is JSON with
# its datasource variable; promtool check rules and promtool test rules
# (files/alerts_test.yaml: each alert firing, and not, over synthetic
# series); and, when helm is on PATH or in the tool cache (make tools), that
# the chart renders the same rules and dashboard as the kustomize component.
# test/integration/monitoring_test.go runs both against a real Prometheus.
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
files=artifacts/chart/platform-apiserver/files
component=artifacts/kustomize/components/monitoring
generated=$component/prometheusrule.yaml
dashboard=$component/dashboard-configmap.yaml
if ! command -v promtool >/dev/null 2>&1; then
  echo "promtool is missing: run 'make deps' as root, or 'sudo apt-get install --no-install-recommends prometheus' (Debian's package has promtool)" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

hack/update-alerts.sh "$tmp"
if ! diff -u "$generated" "$tmp/prometheusrule.yaml" >&2; then
  echo "$generated differs from $files/alerts.rules.yaml: run hack/update-alerts.sh" >&2
  exit 1
fi
if ! diff -u "$dashboard" "$tmp/dashboard-configmap.yaml" >&2; then
  echo "$dashboard differs from $files/dashboard.json: run hack/update-alerts.sh" >&2
  exit 1
fi

# The dashboard parses as JSON and has what Grafana's sidecar and the
# panels need: a uid, a title and the datasource variable of type
# prometheus every panel names.
if command -v jq >/dev/null 2>&1; then
  if ! jq -e '(.uid | length > 0) and (.title | length > 0) and
      any(.templating.list[]; .name == "datasource" and .type == "datasource" and .query == "prometheus")' \
      "$files/dashboard.json" >/dev/null; then
    echo "$files/dashboard.json: not JSON, or without uid, title or the datasource variable of type prometheus" >&2
    exit 1
  fi
elif ! python3 -m json.tool "$files/dashboard.json" >/dev/null; then
  echo "$files/dashboard.json is not JSON" >&2
  exit 1
fi

promtool check rules "$files/alerts.rules.yaml"
(cd "$files" && promtool test rules alerts_test.yaml)

# The spec: everything after the line "spec:" of a PrometheusRule document.
spec_of() { awk '/^---/ {doc = 0; inspec = 0} /^kind: PrometheusRule$/ {doc = 1} inspec && doc {print} doc && /^spec:$/ {inspec = 1}' "$1"; }
helm=$(command -v helm 2>/dev/null || true)
if [[ -z $helm ]]; then
  for h in "${HOME}"/.cache/platform-apiserver/tools/*/helm; do
    if [[ -x $h ]]; then helm=$h; fi
  done
fi
if [[ -z $helm ]]; then
  echo "helm not found (make tools builds it): the chart's rendering was not compared" >&2
else
  "$helm" template platform-apiserver artifacts/chart/platform-apiserver --namespace platform-system \
    --set monitoring.serviceMonitor.enabled=true --show-only templates/monitoring.yaml >"$tmp/chart.yaml"
  spec_of "$tmp/chart.yaml" >"$tmp/chart-spec.yaml"
  spec_of "$generated" >"$tmp/kustomize-spec.yaml"
  if [[ ! -s $tmp/chart-spec.yaml ]] || ! diff -u "$tmp/kustomize-spec.yaml" "$tmp/chart-spec.yaml" >&2; then
    echo "the chart's PrometheusRule spec differs from the kustomize component's (or is missing)" >&2
    exit 1
  fi
  echo "alerts: the chart and the kustomize component render the same PrometheusRule spec"
  "$helm" template platform-apiserver artifacts/chart/platform-apiserver --namespace platform-system \
    --set monitoring.serviceMonitor.enabled=true --show-only templates/dashboard.yaml >"$tmp/chart-dashboard.yaml"
  # The dashboard: the block after the ConfigMap's key.
  json_of() { awk 'injson && /^    / {print; next} {injson = 0} /^  platform-apiserver\.json: \|$/ {injson = 1}' "$1"; }
  json_of "$tmp/chart-dashboard.yaml" >"$tmp/chart-dashboard.json"
  json_of "$dashboard" >"$tmp/kustomize-dashboard.json"
  if [[ ! -s $tmp/chart-dashboard.json ]] || ! diff -u "$tmp/kustomize-dashboard.json" "$tmp/chart-dashboard.json" >&2; then
    echo "the chart's dashboard ConfigMap differs from the kustomize component's (or is missing)" >&2
    exit 1
  fi
  echo "dashboard: the chart and the kustomize component render the same dashboard"
fi
echo "alerts: $(grep -c '^  - alert:' "$files/alerts.rules.yaml") rules checked and tested"
echo "dashboard: $(grep -c '"expr":' "$files/dashboard.json") queries in $files/dashboard.json"
