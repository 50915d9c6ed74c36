package postgres

// PendingApplies is how many Apply batches wait for a group commit.
func (s *Store) PendingApplies() int {
	s.applies.mu.Lock()
	defer s.applies.mu.Unlock()
	return len(s.applies.pending)
}

// ViewSlice is the most view rows one transaction of a write in slices stamps.
const ViewSlice = viewSlice
