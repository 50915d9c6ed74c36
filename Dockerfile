# syntax=docker/dockerfile:1
# For those who build with Docker or BuildKit (docker buildx build --platform
# linux/amd64,linux/arm64 -t IMAGE .). Without a container engine, `make image`
# builds the same kind of image (hack/image): a static binary on a distroless,
# nonroot base, no shell.
ARG GO_VERSION=1.26
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/platform-apiserver ./cmd/apiserver

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/platform-apiserver /usr/local/bin/platform-apiserver
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/platform-apiserver"]
