#!/usr/bin/env bash
# Installs what the tests and `make run` need from Debian's packages on a
# fresh machine: PostgreSQL 15 (initdb, postgres) and its `postgres` system
# user, which runs them when we are root; shellcheck for `make lint`;
# prometheus and promtool (Debian package prometheus) for
# hack/verify-alerts.sh in `make verify` and the monitoring integration test
# (test/integration/monitoring_test.go runs a real Prometheus); and jq, with
# which hack/verify-alerts.sh checks the Grafana dashboard. Does nothing when
# they are there.
set -o errexit -o nounset -o pipefail

apt_updated=
apt_install() {
  if [[ -z $apt_updated ]]; then
    apt-get update -qq
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# Installs a package without starting its service: Debian's prometheus
# package would start a Prometheus server on :9090; only its binaries are
# wanted (the tests start their own, on 127.0.0.1). policy-rc.d exit 101
# tells invoke-rc.d not to start anything.
apt_install_no_start() {
  local policy=/usr/sbin/policy-rc.d created=
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    created=1
  fi
  local rc=0
  apt_install --no-install-recommends "$@" || rc=$?
  if [[ -n $created ]]; then
    rm -f "$policy"
  fi
  return "$rc"
}

if [[ ! -x /usr/lib/postgresql/15/bin/initdb ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "PostgreSQL 15 is missing: run 'sudo apt-get install postgresql-15', or set TEST_DATABASE_URL" >&2
    exit 1
  fi
  echo ">> installing PostgreSQL 15 (Debian package postgresql-15)" >&2
  apt_install postgresql-15
fi
if ! command -v shellcheck >/dev/null 2>&1; then
  if [[ $(id -u) -ne 0 ]]; then
    # Only `make lint` needs it: say so, but let the tests and `make run` go on.
    echo "shellcheck is missing (make lint needs it): run 'sudo apt-get install shellcheck'" >&2
  else
    echo ">> installing shellcheck (Debian package shellcheck)" >&2
    apt_install shellcheck
  fi
fi
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  if [[ $(id -u) -ne 0 ]]; then
    # `make verify` (hack/verify-alerts.sh) and TestMonitoring need them.
    echo "prometheus or promtool is missing (make verify and the monitoring test need them): run 'sudo apt-get install --no-install-recommends prometheus'" >&2
  else
    echo ">> installing prometheus and promtool (Debian package prometheus)" >&2
    apt_install_no_start prometheus
  fi
fi
if ! command -v jq >/dev/null 2>&1; then
  if [[ $(id -u) -ne 0 ]]; then
    # hack/verify-alerts.sh falls back to python3's json.tool without it.
    echo "jq is missing (hack/verify-alerts.sh checks the dashboard with it): run 'sudo apt-get install jq'" >&2
  else
    echo ">> installing jq (Debian package jq)" >&2
    apt_install jq
  fi
fi
# initdb and postgres refuse to run as root; the harness runs them as this user.
if [[ $(id -u) -eq 0 ]] && ! id postgres >/dev/null 2>&1; then
  useradd --system --home /var/lib/postgresql --shell /usr/sbin/nologin postgres
fi
