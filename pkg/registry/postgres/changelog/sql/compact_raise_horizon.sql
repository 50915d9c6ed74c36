-- Raises the horizon to $1, the highest version a compaction batch deleted.
UPDATE registry_change_horizon SET compacted_rv = $1
