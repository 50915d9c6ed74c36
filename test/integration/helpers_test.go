package integration

import (
	"context"
	"os/exec"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
)

// pollAllowed retries call while it is Forbidden, for RBAC changes to land.
func pollAllowed(ctx context.Context, call func() error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = call()
		if apierrors.IsForbidden(last) {
			return false, nil
		}
		return true, last
	})
	if err != nil && last != nil {
		return last
	}
	return err
}

func runCommand(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), name, args...).CombinedOutput()
	return string(out), err
}
