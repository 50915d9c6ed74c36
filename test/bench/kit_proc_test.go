package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// processMemory reads VmRSS (resident set size now) and VmHWM (its peak since
// the process started) of pid from /proc/<pid>/status, in bytes.
func processMemory(pid int) (rss, hwm int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("read memory of pid %d: %w", pid, err)
	}
	for line := range strings.Lines(string(data)) {
		// The kernel prints these as "VmRSS:\t  123456 kB".
		var kb int64
		if _, err := fmt.Sscanf(line, "VmRSS: %d kB", &kb); err == nil {
			rss = kb << 10
		} else if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kb); err == nil {
			hwm = kb << 10
		}
	}
	if rss == 0 || hwm == 0 {
		return 0, 0, fmt.Errorf("/proc/%d/status lacks VmRSS or VmHWM", pid)
	}
	return rss, hwm, nil
}

// clockTicks is the unit of utime and stime in /proc/<pid>/stat (USER_HZ),
// which Linux fixes at 100 for userspace on every architecture Go supports.
const clockTicks = 100

// processCPUTime reads the CPU time pid has used so far, user plus system
// (utime + stime, fields 14 and 15 of /proc/<pid>/stat).
func processCPUTime(pid int) (time.Duration, error) {
	own, _, err := processCPUTimes(pid)
	return own, err
}

// processCPUTimes reads the CPU time pid has used so far (utime + stime,
// fields 14 and 15 of /proc/<pid>/stat) and that of its children it has
// waited for (cutime + cstime, fields 16 and 17).
func processCPUTimes(pid int) (own, reaped time.Duration, err error) {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, fmt.Errorf("read CPU time of pid %d: %w", pid, err)
	}
	// Field 2, the command name, is in parentheses and may hold spaces and
	// parentheses itself; the fields after the last ')' start at field 3.
	end := bytes.LastIndexByte(data, ')')
	fields := strings.Fields(string(data[end+1:]))
	const utime, stime, cutime, cstime = 14 - 3, 15 - 3, 16 - 3, 17 - 3
	if end < 0 || len(fields) <= cstime {
		return 0, 0, fmt.Errorf("parse %s: %q", path, data)
	}
	ticks := make([]int64, 4)
	var errs []error
	for i, f := range []int{utime, stime, cutime, cstime} {
		var err error
		ticks[i], err = strconv.ParseInt(fields[f], 10, 64)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return 0, 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return time.Duration(ticks[0]+ticks[1]) * time.Second / clockTicks, time.Duration(ticks[2]+ticks[3]) * time.Second / clockTicks, nil
}

// serverCPUTime is the CPU time a server of processes has used so far:
// pids' own, and that of the children the first (its parent, as
// PostgreSQL's postmaster is of its backends) has reaped.
func serverCPUTime(pids []int) time.Duration {
	var total time.Duration
	for i, pid := range pids {
		own, reaped, _ := processCPUTimes(pid)
		total += own
		if i == 0 {
			total += reaped
		}
	}
	return total
}

// machineBusyTime is the time every CPU of the machine has spent on
// anything but idling and waiting for I/O (the first line of /proc/stat).
func machineBusyTime() (time.Duration, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	// cpu user nice system idle iowait irq softirq steal ...
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, fmt.Errorf("parse /proc/stat: %q", line)
	}
	var busy int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse /proc/stat: %w", err)
		}
		busy += v
	}
	return time.Duration(busy) * time.Second / clockTicks, nil
}

// cpuClock reads the CPU time each of pids has used so far; a process that
// is gone reads 0.
func cpuClock(pids ...int) []time.Duration {
	out := make([]time.Duration, len(pids))
	for i, pid := range pids {
		out[i], _ = processCPUTime(pid)
	}
	return out
}

// profileSeconds is how long the CPU profile samples the listing loop.
const profileSeconds = 20

// captureProfiles writes a CPU profile of the platform-apiserver taken while
// NodeCapacities are listed through the aggregator in a loop, and a heap
// profile taken right after (`go tool pprof <file>` reads both). The server
// serves /debug/pprof by default (--profiling).
func (e *env) captureProfiles(ctx context.Context) error {
	type profile struct {
		data []byte
		err  error
	}
	done := make(chan profile, 1)
	go func() {
		data, err := e.direct.PlatformV1alpha1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(profileSeconds)).DoRaw(ctx)
		done <- profile{data, err}
	}()
	list := listNodeCapacities(e.platform)
	var cpu profile
loop:
	for {
		select {
		case cpu = <-done:
			break loop
		default:
		}
		if _, err := list(ctx); err != nil {
			<-done
			return fmt.Errorf("list NodeCapacities while profiling: %w", err)
		}
	}
	if err := writeProfile("platform-apiserver.cpu.pprof", cpu.data, cpu.err); err != nil {
		return err
	}
	return e.heapProfile(ctx, "platform-apiserver.heap.pprof", false)
}

// heapProfile writes a heap profile of the platform-apiserver, when
// -platform-profile-dir is set. With live, it is taken after a forced
// collection (gc=1), so it shows what is live now rather than at the last
// collection, which an idle server may not have run since.
func (e *env) heapProfile(ctx context.Context, name string, live bool) error {
	if *profileDir == "" {
		return nil
	}
	req := e.direct.PlatformV1alpha1().RESTClient().Get().AbsPath("/debug/pprof/heap")
	if live {
		req = req.Param("gc", "1")
	}
	data, err := req.DoRaw(ctx)
	return writeProfile(name, data, err)
}

// writeProfile writes a fetched profile to name in -platform-profile-dir.
func writeProfile(name string, data []byte, err error) error {
	if err == nil {
		err = os.MkdirAll(*profileDir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(*profileDir, name), data, 0o644)
	}
	if err != nil {
		return fmt.Errorf("profile %s: %w", name, err)
	}
	return nil
}
