package postgres

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// PinToCPUs restricts the server to the given CPUs: its postmaster and the
// processes it runs now, and so every backend it starts later (they
// inherit it). A benchmark running two servers on one machine pins each to
// cores of its own to see what two machines would do.
func (i *Instance) PinToCPUs(cpus ...int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	for _, pid := range i.Pids() {
		if err := unix.SchedSetaffinity(pid, &set); err != nil {
			return fmt.Errorf("pin postgres process %d to CPUs %v: %w", pid, cpus, err)
		}
	}
	return nil
}

// Pids lists the server's processes: the postmaster and those it runs now
// (backends, WAL sender or receiver, background workers).
func (i *Instance) Pids() []int { return append([]int{i.Pid()}, childPids(i.Pid())...) }
