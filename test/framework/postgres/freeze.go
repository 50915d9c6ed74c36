package postgres

import (
	"errors"
	"fmt"
	"syscall"
)

// Freeze hangs the server the way a paused VM, a storage stall or a
// failover's abandoned primary does: the postmaster and every process it
// started (backends, WAL sender, checkpointer) are stopped with SIGSTOP and
// nothing is killed, so clients see no reset — their connections stay
// established, the kernel still acknowledges what they send and accepts new
// connections into the listen backlog — but nothing answers. Thaw lets it go on.
func (i *Instance) Freeze() error {
	return i.signalAll(syscall.SIGSTOP)
}

// Thaw resumes a frozen server (SIGCONT); what was sent to it meanwhile is
// answered then.
func (i *Instance) Thaw() error {
	return i.signalAll(syscall.SIGCONT)
}

// signalAll signals the postmaster first, so it starts nothing new, then its
// children.
func (i *Instance) signalAll(sig syscall.Signal) error {
	select {
	case <-i.exited:
		return fmt.Errorf("postgres on port %d has exited", i.port)
	default:
	}
	pid := i.cmd.Process.Pid
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("signal %v to postgres pid %d: %w", sig, pid, err)
	}
	for _, c := range childPids(pid) {
		if err := syscall.Kill(c, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signal %v to postgres child pid %d: %w", sig, c, err)
		}
	}
	return nil
}
