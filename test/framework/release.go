package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"k8s.io/klog/v2"
)

// ErrReleaseNotInHistory is BuildRelease's error when the checkout does not
// hold the commit (a shallow clone).
var ErrReleaseNotInHistory = errors.New("the commit is not in this checkout's history (a shallow clone?)")

// BuildRelease returns a platform-apiserver binary built from commit of
// this repository (an earlier release, to run beside this one), built once
// into the user's cache (~/.cache/platform-apiserver/releases/<commit>)
// from `git archive` of the checkout: no work tree is touched.
func BuildRelease(ctx context.Context, commit string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("build release %s: %w", commit, err)
	}
	dir := filepath.Join(cache, "platform-apiserver", "releases", commit)
	bin := filepath.Join(dir, "platform-apiserver")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	if err := exec.CommandContext(ctx, "git", "-C", root, "cat-file", "-e", commit+"^{commit}").Run(); err != nil {
		return "", fmt.Errorf("build release %s: %w", commit, ErrReleaseNotInHistory)
	}
	src, err := os.MkdirTemp("", "platform-release-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(src) }()
	klog.FromContext(ctx).Info("Building an earlier release of platform-apiserver (once; cached)", "commit", commit, "into", bin)
	archive := exec.CommandContext(ctx, "bash", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "archive", root, commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s (the checkout needs its history: a clone, not a shallow copy): %w\n%s", commit, err, out)
	}
	tmp := bin + ".tmp"
	build := exec.CommandContext(ctx, "go", "build", "-o", tmp, "./cmd/apiserver")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build release %s: %w\n%s", commit, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}
