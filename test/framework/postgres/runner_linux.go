package postgres

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// runner runs initdb and postgres as the right OS user.
type runner struct {
	cred *syscall.Credential // nil: the current user
	home string
}

// currentRunner picks the `postgres` system user when running as root.
func currentRunner() (runner, error) {
	if os.Geteuid() != 0 {
		return runner{}, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return runner{}, fmt.Errorf("running as root, and initdb/postgres refuse root, but the `postgres` system user is missing (apt-get install postgresql-15 creates it): %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return runner{}, fmt.Errorf("parse uid of postgres: %w", err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return runner{}, fmt.Errorf("parse gid of postgres: %w", err)
	}
	return runner{cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, home: u.HomeDir}, nil
}

// apply makes cmd run as the runner's user. The child is started directly
// with dropped credentials (rather than through runuser) so the pid we hold
// is the postmaster's own, and it gets SIGINT (fast shutdown) if we die.
func (r runner) apply(cmd *exec.Cmd) {
	// Own process group: a terminal Ctrl-C must reach the harness, which stops
	// postgres last, not postgres directly.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGINT, Setpgid: true}
	if r.cred == nil {
		return
	}
	cmd.SysProcAttr.Credential = r.cred
	cmd.Env = append(os.Environ(), "HOME="+r.home, "USER=postgres", "LOGNAME=postgres")
	cmd.Dir = "/"
}

// own hands dir to the runner's user and makes it traversable.
func (r runner) own(dir string) error {
	if r.cred == nil {
		return nil
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("chmod %s: %w", dir, err)
	}
	return r.ownFile(dir)
}

func (r runner) ownFile(path string) error {
	if r.cred == nil {
		return nil
	}
	if err := os.Chown(path, int(r.cred.Uid), int(r.cred.Gid)); err != nil {
		return fmt.Errorf("chown %s to postgres: %w", filepath.Base(path), err)
	}
	return nil
}
