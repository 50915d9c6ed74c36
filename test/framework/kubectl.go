package framework

import (
	"bytes"
	"context"
	"fmt"
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
	cmd := exec.CommandContext(ctx, binary, full...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), errOut.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), errOut.String(), nil
}
