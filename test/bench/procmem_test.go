package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// processMemory reads VmRSS (resident set size now) and VmHWM (its peak since
// the process started) of pid from /proc/<pid>/status, in bytes.
func processMemory(pid int) (rss, hwm int64, err error) {
	path := fmt.Sprintf("/proc/%d/status", pid)
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("read memory of pid %d: %w", pid, err)
	}
	defer f.Close()
	found := map[string]*int64{"VmRSS": &rss, "VmHWM": &hwm}
	seen := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		dst, wanted := found[key]
		if !ok || !wanted {
			continue
		}
		// The kernel prints these as "<n> kB".
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(value), "kB")), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parse %s in %s: %w", key, path, err)
		}
		*dst = kb << 10
		seen++
	}
	if err := sc.Err(); err != nil {
		return 0, 0, fmt.Errorf("read %s: %w", path, err)
	}
	if seen != len(found) {
		return 0, 0, fmt.Errorf("%s lacks VmRSS or VmHWM", path)
	}
	return rss, hwm, nil
}

// clockTicks is the unit of utime and stime in /proc/<pid>/stat (USER_HZ),
// which Linux fixes at 100 for userspace on every architecture Go supports.
const clockTicks = 100

// processCPUTime reads the CPU time pid has used so far, user plus system
// (utime + stime, fields 14 and 15 of /proc/<pid>/stat).
func processCPUTime(pid int) (time.Duration, error) {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read CPU time of pid %d: %w", pid, err)
	}
	// Field 2, the command name, is in parentheses and may hold spaces and
	// parentheses itself; the fields after the last ')' start at field 3.
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return 0, fmt.Errorf("parse %s: no command name", path)
	}
	fields := strings.Fields(string(data[end+1:]))
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, fmt.Errorf("parse %s: %d fields", path, len(fields)+2)
	}
	var ticks int64
	for _, i := range []int{utime, stime} {
		n, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse field %d of %s: %w", i+3, path, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// cpuOf sums the CPU time the processes pids have used, skipping those gone.
func cpuOf(pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		if t, err := processCPUTime(pid); err == nil {
			total += t
		}
	}
	return total
}

// establishedConnections counts the established TCP connections, IPv4 and
// IPv6, whose local port is port: those a server listening there serves.
func establishedConnections(port int) (int, error) {
	const established = "01" // st in /proc/net/tcp
	n := 0
	for _, path := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(path)
		if err != nil {
			return 0, fmt.Errorf("count connections: %w", err)
		}
		for line := range strings.Lines(string(data)) {
			// sl local_address rem_address st ...; addresses are hex ip:port.
			f := strings.Fields(line)
			if len(f) < 4 || f[3] != established {
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			if !ok {
				continue
			}
			if p, err := strconv.ParseUint(hexPort, 16, 16); err == nil && int(p) == port {
				n++
			}
		}
	}
	return n, nil
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
