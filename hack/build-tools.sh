#!/usr/bin/env bash
# Builds the pinned local stack — etcd, kube-apiserver, kube-controller-manager
# and kubectl (hack/tools), kwok (hack/tools/kwok) and metrics-server
# (hack/tools/metrics-server) — into a cache outside the checkout, keyed by the
# tools modules' content, so every clone on this machine shares one build.
# Prints the directory holding the binaries.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/hack/tools"
key=$(cat "$tools"/go.mod "$tools"/go.sum "$tools"/cmd/*/*.go "$tools"/*/go.mod "$tools"/*/go.sum "$0" | sha256sum | cut -c1-16)
cache="${PLATFORM_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/platform-apiserver/tools}"
out="$cache/$key"

# binary → "module dir:package"
declare -A sources=(
  [etcd]="$tools:./cmd/etcd"
  [kube-apiserver]="$tools:k8s.io/kubernetes/cmd/kube-apiserver"
  [kube-controller-manager]="$tools:k8s.io/kubernetes/cmd/kube-controller-manager"
  [kubectl]="$tools:k8s.io/kubernetes/cmd/kubectl"
  [kwok]="$tools/kwok:sigs.k8s.io/kwok/cmd/kwok"
  [metrics-server]="$tools/metrics-server:sigs.k8s.io/metrics-server/cmd/metrics-server"
)
order=(etcd kube-apiserver kube-controller-manager kubectl kwok metrics-server)

k8s_version=v1.37.2
ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=$k8s_version \
 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/client-go/pkg/version.gitVersion=$k8s_version \
 -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=37"

mkdir -p "$out"
for b in "${order[@]}"; do
  [[ -x "$out/$b" ]] && continue
  dir=${sources[$b]%%:*}
  pkg=${sources[$b]#*:}
  flags="-s -w"
  [[ "$dir" == "$tools" ]] && flags=$ldflags
  echo ">> building $b (a first build of the whole stack takes about 15 minutes)" >&2
  # Build to a temporary name and rename, so an interrupted build never leaves a
  # truncated binary that a later run would trust.
  (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$flags" -o "$out/.$b.$$.tmp" "$pkg")
  mv "$out/.$b.$$.tmp" "$out/$b"
done
echo "$out"
