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
	if err := writeProfile("platform-apiserver.cpu.pprof", cpu.data, cpu.err); err != nil {
		return err
	}
	if err := e.heapProfile(ctx, "platform-apiserver.heap.pprof", false); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "profiles of the platform-apiserver over %d lists in %ds: %s, %s\n", lists, profileSeconds,
		filepath.Join(*profileDir, "platform-apiserver.cpu.pprof"), filepath.Join(*profileDir, "platform-apiserver.heap.pprof"))
	return nil
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
