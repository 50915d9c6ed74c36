package main

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestMakeImagePush runs the README's `make image-push IMAGE=...` against a
// registry on 127.0.0.1, pushing an image that Write stored as make image
// does (a small binary: TestInstall runs make image itself), and reads it
// back: the digest recorded in IMAGE_DIR/digest, nonroot, this platform.
func TestMakeImagePush(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is needed: it is the README's command")
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/platform/platform-apiserver:v0.1.0"
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "make image-push IMAGE=registry.example.com/platform/platform-apiserver:v0.1.0") {
		t.Fatal("README.md no longer gives `make image-push IMAGE=...`, which this test runs")
	}
	dir := t.TempDir()
	writeImage(t, dir, "platform-apiserver:dev", PlatformImage{
		Platform: v1.Platform{OS: "linux", Architecture: runtime.GOARCH},
		Image:    mustAssemble(t, testInputs("binary", runtime.GOARCH)),
	})
	cmd := exec.CommandContext(t.Context(), "make", "--no-print-directory", "image-push", "IMAGE="+ref, "IMAGE_DIR="+dir)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make image-push: %v\n%s", err, out)
	}
	digest, err := os.ReadFile(filepath.Join(dir, "digest"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(string(digest))
	if !strings.Contains(string(out), "pushed "+strings.Split(ref, ":v0.1.0")[0]+"@"+want) {
		t.Errorf("make image-push does not report the pushed digest %s:\n%s", want, out)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := img.Digest(); d.String() != want {
		t.Errorf("registry serves %s, make image recorded %s", d, want)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || cf.Architecture != runtime.GOARCH {
		t.Errorf("pushed image runs as %q on %s, want 65532:65532 on %s", cf.Config.User, cf.Architecture, runtime.GOARCH)
	}
}

// TestMakeImageTargets: make image and make image-dispatcher build each
// package of repoImages under the name the Dockerfile gives it, into
// directories of their own, and make help lists both and their pushes.
func TestMakeImageTargets(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is needed: it is the README's command")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	makeOut := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "make", append([]string{"--no-print-directory"}, args...)...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// -n prints the commands without running them: nothing compiles.
	out := makeOut("-n", "image", "image-dispatcher", "image-dispatcher-push", "IMAGE_DIR=/tmp/img", "GO=go")
	for _, want := range []string{
		"go run ./hack/image build --binary " + repoImages[0].binary + " --package " + repoImages[0].pkg + " --image platform-apiserver:dev --platforms linux/amd64,linux/arm64 --output /tmp/img\n",
		"go run ./hack/image build --binary " + repoImages[1].binary + " --package " + repoImages[1].pkg + " --image platform-kueue-dispatcher:dev --platforms linux/amd64,linux/arm64 --output /tmp/img/kueue-dispatcher\n",
		"go run ./hack/image push --image platform-kueue-dispatcher:dev --from /tmp/img/kueue-dispatcher\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("make -n runs\n%s\nwithout\n%s", out, want)
		}
	}
	help := makeOut("help")
	for _, target := range []string{"image", "image-push", "image-dispatcher", "image-dispatcher-push"} {
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(target) + ` +\S`).MatchString(help) {
			t.Errorf("make help does not list %s:\n%s", target, help)
		}
	}
}
