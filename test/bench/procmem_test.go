package bench

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

const mib = 1 << 20

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
