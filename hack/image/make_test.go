package main

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
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
