#!/usr/bin/env bash
# Builds the pinned control plane (etcd, kube-apiserver, kube-controller-manager,
# kubectl) from hack/tools into a cache outside the checkout, keyed by the tools
# module's content, so every clone on this machine shares one build.
# Prints the directory holding the binaries.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/hack/tools"
key=$(cat "$tools/go.mod" "$tools/go.sum" "$tools"/cmd/*/*.go "$0" | sha256sum | cut -c1-16)
cache="${PLATFORM_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/platform-apiserver/tools}"
out="$cache/$key"
bins=(etcd kube-apiserver kube-controller-manager kubectl)

missing=()
for b in "${bins[@]}"; do
  [[ -x "$out/$b" ]] || missing+=("$b")
done
if ((${#missing[@]} == 0)); then
  echo "$out"
  exit 0
fi

mkdir -p "$out"
k8s_version=v1.37.2
ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=$k8s_version \
 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/client-go/pkg/version.gitVersion=$k8s_version \
 -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=37"

cd "$tools"
for b in "${missing[@]}"; do
  case "$b" in
    etcd) pkg=./cmd/etcd ;;
    *) pkg=k8s.io/kubernetes/cmd/$b ;;
  esac
  echo ">> building $b (first build of kube-apiserver takes several minutes)" >&2
  # Build to a temporary name and rename, so an interrupted build never leaves a
  # truncated binary that a later run would trust.
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/.$b.tmp" "$pkg"
  mv "$out/.$b.tmp" "$out/$b"
done
echo "$out"
