#!/usr/bin/env bash
# Regenerates deepcopy/conversion/defaulter helpers, OpenAPI definitions and
# the typed clientset, listers and informers from pkg/apis, with the
# k8s.io/code-generator version pinned in go.mod.
set -o errexit -o nounset -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
module=$(go list -m)
# A fresh module cache may not hold code-generator's sources yet.
go mod download k8s.io/code-generator
codegen_pkg=$(go list -m -f '{{.Dir}}' k8s.io/code-generator)
# Generators land in a project-local bin, not in the user's GOPATH/bin.
export GOBIN="$root/_output/codegen-bin"

# shellcheck source=/dev/null
source "$codegen_pkg/kube_codegen.sh"

kube::codegen::gen_helpers \
  --boilerplate "$root/hack/boilerplate.go.txt" \
  "$root/pkg/apis"

kube::codegen::gen_openapi \
  --output-dir "$root/pkg/generated/openapi" \
  --output-pkg "$module/pkg/generated/openapi" \
  --report-filename "$root/hack/api-rule-violations.list" \
  --update-report \
  --output-model-name-file zz_generated.model_name.go \
  --boilerplate "$root/hack/boilerplate.go.txt" \
  "$root/pkg/apis"

kube::codegen::gen_client \
  --with-watch \
  --output-dir "$root/pkg/generated" \
  --output-pkg "$module/pkg/generated" \
  --boilerplate "$root/hack/boilerplate.go.txt" \
  "$root/pkg/apis"
