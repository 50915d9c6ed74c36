-- The horizon, locked: concurrent compactions take turns.
SELECT compacted_rv FROM registry_change_horizon FOR UPDATE
