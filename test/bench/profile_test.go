package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// profileSeconds is how long the CPU profile samples the listing loop.
const profileSeconds = 20

// captureProfiles writes, to dir, a CPU profile of the platform-apiserver
// taken while NodeCapacities are listed through the aggregator in a loop, and
// a heap profile taken right after (`go tool pprof <file>` reads both). The
// server serves /debug/pprof by default (--profiling).
func (e *env) captureProfiles(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create profile directory: %w", err)
	}
	debug := e.direct.PlatformV1alpha1().RESTClient()

	type profile struct {
		data []byte
		err  error
	}
	done := make(chan profile, 1)
	go func() {
		data, err := debug.Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(profileSeconds)).DoRaw(ctx)
		done <- profile{data, err}
	}()
	list := listNodeCapacities(e.platform)
	lists := 0
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
		lists++
	}
	if cpu.err != nil {
		return fmt.Errorf("CPU profile of the platform-apiserver: %w", cpu.err)
	}
	cpuPath := filepath.Join(dir, "platform-apiserver.cpu.pprof")
	if err := os.WriteFile(cpuPath, cpu.data, 0o644); err != nil {
		return err
	}

	heapPath := filepath.Join(dir, "platform-apiserver.heap.pprof")
	if err := e.writeHeapProfile(ctx, heapPath, false); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "profiles of the platform-apiserver over %d lists in %ds: %s, %s\n",
		lists, profileSeconds, cpuPath, heapPath)
	return nil
}

// writeHeapProfile writes a heap profile of the platform-apiserver to path,
// creating its directory. With live, it is taken after a forced collection
// (gc=1), so it shows what is live now rather than at the last collection,
// which an idle server may not have run since.
func (e *env) writeHeapProfile(ctx context.Context, path string, live bool) error {
	req := e.direct.PlatformV1alpha1().RESTClient().Get().AbsPath("/debug/pprof/heap")
	if live {
		req = req.Param("gc", "1")
	}
	heap, err := req.DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("heap profile of the platform-apiserver: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create profile directory: %w", err)
	}
	return os.WriteFile(path, heap, 0o644)
}
