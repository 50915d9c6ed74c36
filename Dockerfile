# syntax=docker/dockerfile:1
# For those who build with Docker or BuildKit. Without a container engine,
# `make image` and `make image-dispatcher` build the same kind of images
# (hack/image): a static binary on a distroless, nonroot base, no shell.
#
# Two images, one target each; the default is the server:
#
#   docker buildx build --platform linux/amd64,linux/arm64 -t IMAGE .
#       platform-apiserver (./cmd/apiserver), target apiserver
#   docker buildx build --platform linux/amd64,linux/arm64 --target kueue-dispatcher -t IMAGE .
#       platform-kueue-dispatcher (./cmd/kueue-dispatcher)
#
# Each runs /usr/local/bin/<its binary> as 65532:65532. The target is the only
# choice to make: an exec-form ENTRYPOINT expands no build argument, so each
# image is a stage of its own, and BuildKit compiles only the binary of the
# target it builds.
ARG GO_VERSION=1.26
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS source
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .

FROM source AS build-kueue-dispatcher
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/platform-kueue-dispatcher ./cmd/kueue-dispatcher

FROM source AS build-apiserver
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/platform-apiserver ./cmd/apiserver

FROM gcr.io/distroless/static-debian12:nonroot AS kueue-dispatcher
COPY --from=build-kueue-dispatcher /out/platform-kueue-dispatcher /usr/local/bin/platform-kueue-dispatcher
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/platform-kueue-dispatcher"]

# The last stage, so the default.
FROM gcr.io/distroless/static-debian12:nonroot AS apiserver
COPY --from=build-apiserver /out/platform-apiserver /usr/local/bin/platform-apiserver
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/platform-apiserver"]
