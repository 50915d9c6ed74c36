// Command image builds the container images of this repository's binaries
// without a container engine, and pushes them to a registry: `make image` and
// `make image-push` for platform-apiserver, `make image-dispatcher` and
// `make image-dispatcher-push` for platform-kueue-dispatcher.
//
//	go run ./hack/image build --image platform-apiserver:dev --platforms linux/amd64,linux/arm64 --output _output/image
//	go run ./hack/image push  --from _output/image --image registry.example.com/platform/platform-apiserver:v0.1.0
//	go run ./hack/image build --binary platform-kueue-dispatcher --package ./cmd/kueue-dispatcher \
//	    --image platform-kueue-dispatcher:dev --output _output/image/kueue-dispatcher
//
// --binary names the binary (default platform-apiserver): the image holds
// --package's binary as /usr/local/bin/<binary>, its entrypoint, and build
// archives it as <binary>.tar.
//
// The image is static and minimal: the CGO-free binary, the build machine's CA
// certificates, /etc/passwd and /etc/group with the nonroot user (65532),
// /tmp, and nothing else (no shell, no package manager). Its config runs the
// binary as 65532:65532. The same inputs (source, Go toolchain, CA bundle,
// SOURCE_DATE_EPOCH) give the same digest: every timestamp is the source date,
// every tar header is normalized, and gzip is deterministic.
//
// build writes, under --output:
//
//	oci/                       an OCI image layout (index.json, oci-layout, blobs/)
//	<binary>.tar               the same layout as one archive (platform-apiserver.tar),
//	                           plus a manifest.json (Docker's archive format) for the
//	                           first platform, so `docker load`, `podman load`,
//	                           `ctr import` and `skopeo copy oci-archive:` all accept it
//	digest                     the digest of what push will push (index or manifest)
//	bin/<os>-<arch>/<binary>   the binaries it compiled
//
// push reads oci/ and pushes it with go-containerregistry, using the
// credentials of `docker login` / `podman login` (~/.docker/config.json,
// $REGISTRY_AUTH_FILE, ${XDG_RUNTIME_DIR}/containers/auth.json).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: image build|push [flags] (see -h of each)")
	}
	switch args[0] {
	case "build":
		fs := flag.NewFlagSet("build", flag.ContinueOnError)
		var o BuildOptions
		var platforms string
		fs.StringVar(&o.Image, "image", "platform-apiserver:dev", "reference the archive names the image by (docker load tags it so)")
		fs.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list; the first one also goes into the archive's manifest.json for docker load")
		fs.StringVar(&o.Output, "output", "_output/image", "directory for oci/, <binary>.tar and digest")
		fs.StringVar(&o.Package, "package", "./cmd/apiserver", "Go package of the binary")
		fs.StringVar(&o.Binary, "binary", DefaultBinary, "name of the binary: the image runs /usr/local/bin/<binary>, build writes <binary>.tar")
		fs.StringVar(&o.CACertificates, "ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle installed as /etc/ssl/certs/ca-certificates.crt")
		fs.StringVar(&o.Version, "version", "", "org.opencontainers.image.version label (default: git describe)")
		fs.StringVar(&o.Revision, "revision", "", "org.opencontainers.image.revision label (default: git rev-parse HEAD)")
		fs.Int64Var(&o.SourceDateEpoch, "source-date-epoch", -1, "Unix time of every timestamp in the image (default: $SOURCE_DATE_EPOCH, else the HEAD commit's time)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		for p := range strings.SplitSeq(platforms, ",") {
			if p = strings.TrimSpace(p); p != "" {
				o.Platforms = append(o.Platforms, p)
			}
		}
		res, err := Build(ctx, o)
		if err != nil {
			return err
		}
		fmt.Printf("built %s (%s) for %s\n  %s\n  %s\n", o.Image, res.Digest, strings.Join(o.Platforms, ", "), res.LayoutDir, res.Archive)
		return nil
	case "push":
		fs := flag.NewFlagSet("push", flag.ContinueOnError)
		var o PushOptions
		fs.StringVar(&o.From, "from", "_output/image", "output directory of build")
		fs.StringVar(&o.Image, "image", "", "registry reference to push to, e.g. registry.example.com/platform/platform-apiserver:v0.1.0")
		fs.BoolVar(&o.Insecure, "insecure", false, "allow plain HTTP (a registry on localhost or a private address is reached over HTTP anyway)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		pushed, err := Push(ctx, o)
		if err != nil {
			return err
		}
		fmt.Printf("pushed %s\n", pushed)
		return nil
	default:
		return fmt.Errorf("unknown subcommand %q: want build or push", args[0])
	}
}
