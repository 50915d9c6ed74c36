package postgres

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Snapshot copies the data directory of a paused server (Pause) to dst, as
// a volume snapshot would: RestoreSnapshot puts it back later, and the
// server resumes (Resume) on the same timeline with every commit made
// after the snapshot lost.
func (i *Instance) Snapshot(dst string) error {
	if out, err := exec.Command("cp", "-a", filepath.Join(i.dir, "data"), dst).CombinedOutput(); err != nil {
		return fmt.Errorf("snapshot the data directory: %w\n%s", err, out)
	}
	return nil
}

// RestoreSnapshot replaces the data directory of a paused server with the
// copy Snapshot made at src.
func (i *Instance) RestoreSnapshot(src string) error {
	data := filepath.Join(i.dir, "data")
	if err := os.RemoveAll(data); err != nil {
		return fmt.Errorf("restore a snapshot: %w", err)
	}
	if out, err := exec.Command("cp", "-a", src, data).CombinedOutput(); err != nil {
		return fmt.Errorf("restore a snapshot: %w\n%s", err, out)
	}
	return nil
}
