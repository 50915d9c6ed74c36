package postgres

import (
	"fmt"
	"time"

	"github.com/example/platform-apiserver/pkg/backoff"
)

// The registry's write slots bound the large discovery writes (relists,
// see large) that run at once on the database, whatever the number of
// replicas: each takes one of registryWriteSlots advisory locks
// (WriteSlotClass, 0..registryWriteSlots-1) first in its transaction and
// holds it to the end. Without them every replica brought its own writes
// pool's worth, and on a database whose CPU they already filled, three
// replicas ran three times as many relists at once, each a third as fast,
// and the writer lock's holder with them: the fleet benchmark's three
// replicas synced in twice one replica's time (docs/benchmarks.md, issue
// 25). Small batches, usage reports and claims take no slot.
const (
	// WriteSlotClass is the first key of the write slots' advisory locks.
	WriteSlotClass = 0x736c6f74 // "slot"
	// registryWriteSlots is one replica's writes pool: a replica alone is
	// never held back by them.
	registryWriteSlots = writesPoolSize
)

var sqlTryWriteSlot = statement("write_try_slot")

// takeWriteSlot takes a write slot for the rest of the transaction,
// retrying while all are taken (an advisory lock cannot wait for any one
// of several).
func (w *writer) takeWriteSlot() error {
	begin := time.Now()
	retry := backoff.New(5 * time.Millisecond)
	retry.Cap = 200 * time.Millisecond
	for {
		var slot *int32
		if err := w.tx.QueryRow(w.ctx, sqlTryWriteSlot, WriteSlotClass, registryWriteSlots).Scan(&slot); err != nil {
			return fmt.Errorf("take a write slot: %w", err)
		}
		if slot != nil {
			writeSlotWait.Observe(time.Since(begin).Seconds())
			return nil
		}
		select {
		case <-w.ctx.Done():
			return fmt.Errorf("take a write slot: %w", w.ctx.Err())
		case <-time.After(retry.Step()):
		}
	}
}
