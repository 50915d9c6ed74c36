#!/usr/bin/env bash
# Provides the pinned local stack — etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kubectl (hack/tools), kwok (hack/tools/kwok) and metrics-server
# (hack/tools/metrics-server), and on request helm (hack/tools/helm) and Kueue's
# manager kueue (hack/tools/kueue, for the MultiKueue harness) — in a
# cache outside the checkout, keyed by the tools modules' content, so every
# clone on this machine shares it. Prints the directory holding the binaries.
#
#   hack/build-tools.sh              the control plane (make run, make test)
#   hack/build-tools.sh helm kubectl only those
#   hack/build-tools.sh all          the control plane and helm (make tools)
#
# Each missing binary is taken, in this order, from:
#   1. a binary of the pinned version already on the machine: in
#      $KUBEBUILDER_ASSETS, envtest's asset directories
#      (~/.local/share/kubebuilder-envtest/k8s/*), earlier caches of this
#      script, or PATH — checked with its own --version (or `go version -m`)
#      and copied into the cache;
#   2. else built from source, with progress and the time each build took.
# Building everything from source took 19.6 minutes on a fresh 2-core machine;
# kube-apiserver, kube-controller-manager and kubectl are most of that. Each
# build's seconds are kept in $cache/build-seconds, and the next build of
# the same binary on this machine prints them as its estimate.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/hack/tools"
cache="${PLATFORM_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/platform-apiserver/tools}"

# pinned MODULE_DIR MODULE: the version go.mod in MODULE_DIR requires.
pinned() { awk -v m="$2" '$1 == "require" {$1 = ""; $0 = $0} $1 == m && $2 ~ /^v/ {print $2; exit}' "$1/go.mod"; }

k8s_version=$(pinned "$tools" k8s.io/kubernetes)
k8s_minor=$(echo "$k8s_version" | cut -d. -f2)
ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=$k8s_version \
 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$k8s_minor \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/client-go/pkg/version.gitVersion=$k8s_version \
 -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$k8s_minor"
helm_version=$(pinned "$tools/helm" helm.sh/helm/v3)
kueue_version=$(pinned "$tools/kueue" sigs.k8s.io/kueue)

# binary → "module dir|package|pinned version|build flags"
declare -A sources=(
  [etcd]="$tools|./cmd/etcd|$(pinned "$tools" go.etcd.io/etcd/server/v3)|$ldflags"
  [kube-apiserver]="$tools|k8s.io/kubernetes/cmd/kube-apiserver|$k8s_version|$ldflags"
  [kube-controller-manager]="$tools|k8s.io/kubernetes/cmd/kube-controller-manager|$k8s_version|$ldflags"
  [kubectl]="$tools|k8s.io/kubernetes/cmd/kubectl|$k8s_version|$ldflags"
  [kube-scheduler]="$tools|k8s.io/kubernetes/cmd/kube-scheduler|$k8s_version|$ldflags"
  [kwok]="$tools/kwok|sigs.k8s.io/kwok/cmd/kwok|$(pinned "$tools/kwok" sigs.k8s.io/kwok)|-s -w"
  [metrics-server]="$tools/metrics-server|sigs.k8s.io/metrics-server/cmd/metrics-server|$(pinned "$tools/metrics-server" sigs.k8s.io/metrics-server)|-s -w"
  [helm]="$tools/helm|helm.sh/helm/v3/cmd/helm|$helm_version|-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
  [kueue]="$tools/kueue|sigs.k8s.io/kueue/cmd/kueue|$kueue_version|-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$kueue_version"
)
default=(etcd kube-apiserver kube-controller-manager kubectl kwok metrics-server kube-scheduler)
wanted=("$@")
[[ ${#wanted[@]} -eq 0 ]] && wanted=("${default[@]}")
[[ "${wanted[*]}" == all ]] && wanted=("${default[@]}" helm)
for b in "${wanted[@]}"; do
  [[ -n "${sources[$b]:-}" ]] || { echo "unknown tool $b: want one of ${!sources[*]}" >&2; exit 2; }
done

# The cache key covers what decides the binaries: the tools modules (pins and
# sums), the etcd main and the flags.
# (Not the checkout's path: every clone on this machine shares the cache.)
key=$(cat "$tools"/go.mod "$tools"/go.sum "$tools"/cmd/*/*.go "$tools"/*/go.mod "$tools"/*/go.sum \
  <(for b in "${!sources[@]}"; do echo "$b|${sources[$b]#*|}"; done | sort) | sha256sum | cut -c1-16)
out="$cache/$key"

# version_of NAME PATH: the version the binary at PATH says it is (vX.Y.Z), or nothing.
version_of() {
  local v=""
  case "$1" in
    etcd) v=$(timeout 10 "$2" --version 2>/dev/null | awk '/^etcd Version:/ {print "v"$3; exit}') ;;
    kube-apiserver|kube-controller-manager|kube-scheduler) v=$(timeout 10 "$2" --version 2>/dev/null | awk '/^Kubernetes / {print $2; exit}') ;;
    kubectl) v=$(timeout 10 "$2" version --client -o json 2>/dev/null | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p' | head -1) ;;
    kwok) v=$(timeout 10 "$2" --version 2>/dev/null | awk '/^kwok version/ {print $3; exit}') ;;
    helm) v=$(timeout 10 "$2" version --template '{{.Version}}' 2>/dev/null) ;;
    # kueue has no --version: the module it was built from (main module of
    # a go install, a dependency of a tools module's build).
    kueue) v=$(go version -m "$2" 2>/dev/null | awk '($1 == "mod" || $1 == "dep") && $2 == "sigs.k8s.io/kueue" {print $3; exit}') ;;
    metrics-server)
      v=$(timeout 10 "$2" --version 2>/dev/null | head -1)
      [[ "$v" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || v=$(go version -m "$2" 2>/dev/null | awk '$1 == "mod" && $2 == "sigs.k8s.io/metrics-server" {print $3}') ;;
  esac
  echo "$v"
}

# candidates NAME: paths on this machine that may hold NAME.
candidates() {
  local d
  [[ -n "${KUBEBUILDER_ASSETS:-}" ]] && echo "$KUBEBUILDER_ASSETS/$1"
  for d in "${XDG_DATA_HOME:-$HOME/.local/share}"/kubebuilder-envtest/k8s/*/ "$cache"/*/; do
    [[ "$d" == "$out/" ]] || echo "$d$1"
  done
  command -v "$1" 2>/dev/null || true
}

install_tmp() { echo "$out/.$1.$$.tmp"; }

# The seconds each binary's last build from source took on this machine,
# kept across tool versions ("<binary> <seconds>" lines).
times="$cache/build-seconds"
minutes() { echo "$(($1 / 60))m$(($1 % 60))s"; }
last_seconds() {
  if [[ -f "$times" ]]; then awk -v b="$1" '$1 == b {s = $2} END {if (s != "") print s}' "$times"; fi
}
record_seconds() {
  mkdir -p "$cache"
  { [[ -f "$times" ]] && awk -v b="$1" '$1 != b' "$times"; echo "$1 $2"; } >"$times.$$.tmp"
  mv -f "$times.$$.tmp" "$times"
}
# estimate BINARY...: what building them all from source takes, from the
# last builds on this machine where known.
estimate() {
  local total=0 unknown=() b s
  for b in "$@"; do
    s=$(last_seconds "$b")
    if [[ -n "$s" ]]; then total=$((total + s)); else unknown+=("$b"); fi
  done
  if [[ ${#unknown[@]} -eq 0 ]]; then
    echo "building all of them took $(minutes "$total") last time on this machine"
  elif [[ $total -gt 0 ]]; then
    echo "$(minutes "$total") for those built here before, plus ${unknown[*]} (never built here; all six took 19.6 minutes on a fresh 2-core machine)"
  else
    echo "never built here; all six took 19.6 minutes on a fresh 2-core machine"
  fi
}

mkdir -p "$out"
missing=()
for b in "${wanted[@]}"; do
  [[ -x "$out/$b" ]] || missing+=("$b")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  start=$SECONDS
  built=0
  reused=0
  i=0
  echo ">> tools: ${#missing[@]} of ${#wanted[@]} missing from $out (${missing[*]}); each is reused if found, else built: $(estimate "${missing[@]}")" >&2
  for b in "${missing[@]}"; do
    i=$((i + 1))
    IFS='|' read -r dir pkg version flags <<<"${sources[$b]}"
    found=""
    while IFS= read -r c; do
      [[ -x "$c" && ! -d "$c" ]] || continue
      if [[ "$(version_of "$b" "$c")" == "$version" ]]; then
        found=$c
        break
      fi
    done < <(candidates "$b")
    tmp=$(install_tmp "$b")
    if [[ -n "$found" ]]; then
      echo ">> [$i/${#missing[@]}] $b $version: reusing $found" >&2
      ln -f "$found" "$tmp" 2>/dev/null || cp "$found" "$tmp"
      reused=$((reused + 1))
    else
      last=$(last_seconds "$b")
      echo ">> [$i/${#missing[@]}] $b $version: building from source ($pkg)${last:+, $(minutes "$last") last time on this machine} ..." >&2
      t0=$SECONDS
      # Build to a temporary name and rename, so an interrupted build never
      # leaves a truncated binary that a later run would trust.
      (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$flags" -o "$tmp" "$pkg")
      echo ">> [$i/${#missing[@]}] $b built in $(minutes $((SECONDS - t0)))" >&2
      record_seconds "$b" $((SECONDS - t0))
      built=$((built + 1))
    fi
    mv -f "$tmp" "$out/$b"
  done
  echo ">> tools ready in $(minutes $((SECONDS - start))): $reused reused, $built built ($out)" >&2
fi
echo "$out"
