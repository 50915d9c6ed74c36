package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Kubectl runs the built kubectl as admin and returns its stdout and stderr.
// A non-zero exit is an error that carries stderr.
func (cp *ControlPlane) Kubectl(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	return cp.KubectlAs(ctx, cp.adminKubeconfig, args...)
}

// KubectlAs runs the built kubectl with the given kubeconfig (for example one
// from UserConfig).
func (cp *ControlPlane) KubectlAs(ctx context.Context, kubeconfig string, args ...string) (stdout, stderr string, err error) {
	return cp.KubectlBinaryAs(ctx, filepath.Join(cp.binDir, "kubectl"), kubeconfig, args...)
}

// KubectlBinaryAs runs the kubectl at binary (e.g. another release than the
// built one) with the given kubeconfig, as KubectlAs runs the built one.
func (cp *ControlPlane) KubectlBinaryAs(ctx context.Context, binary, kubeconfig string, args ...string) (stdout, stderr string, err error) {
	full := append([]string{
		"--kubeconfig=" + kubeconfig,
		// A cache per control plane, so discovery from an earlier run on the
		// same port is never reused.
		"--cache-dir=" + filepath.Join(cp.workDir, "kubectl-cache"),
	}, args...)
	return runKubectl(exec.CommandContext(ctx, binary, full...), args)
}

// KubectlPlugin runs a kubectl plugin of this module (e.g. `platform
// usage ...` runs cmd/kubectl-platform) through the built kubectl with the
// given kubeconfig, as a user with the plugin on their PATH does (kubectl
// takes no flags before a plugin's name: the kubeconfig is KUBECONFIG's).
// The plugins are built on first use.
func (cp *ControlPlane) KubectlPlugin(ctx context.Context, kubeconfig string, args ...string) (stdout, stderr string, err error) {
	dir := filepath.Join(cp.workDir, "plugins")
	cp.pluginsOnce.Do(func() {
		cp.pluginsErr = BuildCommand(ctx, "./cmd/kubectl-platform", filepath.Join(dir, "kubectl-platform"))
	})
	if cp.pluginsErr != nil {
		return "", "", cp.pluginsErr
	}
	cmd := exec.CommandContext(ctx, filepath.Join(cp.binDir, "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return runKubectl(cmd, args)
}

// runKubectl runs cmd; a non-zero exit is an error that carries stderr.
func runKubectl(cmd *exec.Cmd, args []string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), errOut.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), errOut.String(), nil
}
