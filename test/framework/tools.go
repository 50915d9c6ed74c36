package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// controlPlaneBinaries are the programs hack/build-tools.sh provides.
var controlPlaneBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl"}

// ModuleRoot returns the directory of this module's go.mod, from `go env GOMOD`
// or else by walking up from the working directory.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err == nil {
		if gomod := strings.TrimSpace(string(out)); gomod != "" && gomod != os.DevNull {
			return filepath.Dir(gomod), nil
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find module root: no go.mod in the working directory or above it; run from inside the platform-apiserver checkout")
		}
		dir = parent
	}
}

// resolveBinDir returns binDir after checking it, or runs hack/build-tools.sh
// (building missing binaries into its cache) and returns the directory it prints.
func resolveBinDir(ctx context.Context, binDir string, log io.Writer) (string, error) {
	if binDir == "" {
		root, err := ModuleRoot()
		if err != nil {
			return "", err
		}
		script := filepath.Join(root, "hack", "build-tools.sh")
		klog.FromContext(ctx).Info("Resolving control-plane binaries (reused when their versions match, else built: up to about 20 minutes the first time)", "script", script)
		cmd := exec.CommandContext(ctx, "bash", script)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if log != nil {
			cmd.Stderr = io.MultiWriter(&stderr, log)
		}
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("build control-plane binaries with %s: %w\n%s", script, err, stderr.String())
		}
		binDir = strings.TrimSpace(string(out))
	}
	for _, b := range controlPlaneBinaries {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return "", fmt.Errorf("control-plane binary %s missing from %s (run hack/build-tools.sh or fix Options.BinDir): %w", b, binDir, err)
		}
	}
	return binDir, nil
}

// BuildPlatformAPIServer builds ./cmd/apiserver of this module to out.
func BuildPlatformAPIServer(ctx context.Context, out string) error {
	return BuildCommand(ctx, "./cmd/apiserver", out)
}

// BuildCommand builds the command pkg of this module (such as
// ./cmd/apiserver) to out.
func BuildCommand(ctx context.Context, pkg, out string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Building", "package", pkg, "output", out)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	if combined, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s (go build %s in %s): %w\n%s", pkg, pkg, root, err, combined)
	}
	return nil
}

// platformBuild is this process's build of ./cmd/apiserver, shared by every
// control plane started without Options.PlatformAPIServerBinary: linking it
// takes about as long as starting the rest of a stack.
var platformBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// sharedPlatformAPIServer builds ./cmd/apiserver once per process (RunTests
// removes it) and returns its path.
func sharedPlatformAPIServer(ctx context.Context) (string, error) {
	platformBuild.once.Do(func() {
		// Not the first caller's context: a test that ends mid-build must
		// not leave every later one without a binary.
		ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), klog.FromContext(ctx)), 10*time.Minute)
		defer cancel()
		if platformBuild.dir, platformBuild.err = os.MkdirTemp("", "platform-apiserver-build-"); platformBuild.err != nil {
			return
		}
		platformBuild.path = filepath.Join(platformBuild.dir, "platform-apiserver")
		platformBuild.err = BuildPlatformAPIServer(ctx, platformBuild.path)
	})
	return platformBuild.path, platformBuild.err
}

// PlatformAPIServerBinary returns the path of the platform-apiserver binary
// the test process built once, for tests that run its commands themselves
// (platform-apiserver migrate).
func PlatformAPIServerBinary(ctx context.Context) (string, error) {
	return sharedPlatformAPIServer(ctx)
}
