// Package buildtools tests hack/build-tools.sh: binaries of the pinned
// versions found on the machine are reused, others are built, and a complete
// cache is used as it is.
package buildtools

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func script(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestBuildToolsReusesMatchingVersions runs build-tools.sh with a fake
// envtest directory (KUBEBUILDER_ASSETS) holding a kube-apiserver of the
// pinned version and a kubectl of another, and a fake `go` that "builds" by
// writing a marker: the first is copied, the second built, with a line of
// progress each; a second run finds both in the cache and prints only the
// directory.
func TestBuildToolsReusesMatchingVersions(t *testing.T) {
	tmp := t.TempDir()
	assets, fakeBin, cache := filepath.Join(tmp, "assets"), filepath.Join(tmp, "bin"), filepath.Join(tmp, "cache")
	for _, d := range []string{assets, fakeBin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script(t, filepath.Join(assets, "kube-apiserver"), `[ "$1" = --version ] && echo "Kubernetes v1.37.2"; exit 0 # envtest's`)
	script(t, filepath.Join(assets, "kubectl"), `echo '{"clientVersion": {"gitVersion": "v1.30.0"}}'`)
	// go build ... -o OUT PKG: write a marker to OUT.
	script(t, filepath.Join(fakeBin, "go"), `while [ $# -gt 0 ]; do [ "$1" = -o ] && { echo "built by go" > "$2"; chmod +x "$2"; }; shift; done`)

	run := func() (string, string) {
		cmd := exec.Command("bash", "../build-tools.sh", "kube-apiserver", "kubectl")
		cmd.Env = append(os.Environ(),
			"PLATFORM_TOOLS_CACHE="+cache, "KUBEBUILDER_ASSETS="+assets,
			"XDG_DATA_HOME="+filepath.Join(tmp, "data"), "PATH="+fakeBin+":/usr/bin:/bin")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("build-tools.sh: %v\n%s", err, stderr.String())
		}
		return strings.TrimSpace(string(out)), stderr.String()
	}
	dir, progress := run()
	if !strings.HasPrefix(dir, cache+"/") {
		t.Fatalf("build-tools.sh printed %q, want a directory in %s", dir, cache)
	}
	for _, want := range []string{
		"[1/2] kube-apiserver v1.37.2: reusing " + filepath.Join(assets, "kube-apiserver"),
		"[2/2] kubectl v1.37.2: building from source",
		"[2/2] kubectl built in ",
		"1 reused, 1 built",
	} {
		if !strings.Contains(progress, want) {
			t.Errorf("progress lacks %q:\n%s", want, progress)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "kube-apiserver")); !strings.Contains(string(b), "envtest's") {
		t.Errorf("kube-apiserver in the cache is not envtest's: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "kubectl")); string(b) != "built by go\n" {
		t.Errorf("kubectl of another version was reused instead of built: %q", b)
	}
	again, progress := run()
	if again != dir || progress != "" {
		t.Errorf("second run: %q with progress %q, want %q and nothing on stderr", again, progress, dir)
	}
}
