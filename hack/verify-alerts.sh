#!/usr/bin/env bash
# Checks the alerts (docs/runbook.md): the kustomize monitoring component's
# PrometheusRule is what hack/update-alerts.sh makes of the chart's
# files/alerts.rules.yaml; promtool check rules and promtool test rules
# (files/alerts_test.yaml: each alert firing, and not, over synthetic
# series); and, when helm is on PATH or in the tool cache (make tools), that
# the chart renders the same spec as the kustomize component.
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
files=artifacts/chart/platform-apiserver/files
generated=artifacts/kustomize/components/monitoring/prometheusrule.yaml
if ! command -v promtool >/dev/null 2>&1; then
  echo "promtool is missing: run 'make deps' as root, or 'sudo apt-get install --no-install-recommends prometheus' (Debian's package has promtool)" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

hack/update-alerts.sh "$tmp/prometheusrule.yaml"
if ! diff -u "$generated" "$tmp/prometheusrule.yaml" >&2; then
  echo "$generated differs from $files/alerts.rules.yaml: run hack/update-alerts.sh" >&2
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
fi
echo "alerts: $(grep -c '^  - alert:' "$files/alerts.rules.yaml") rules checked and tested"
