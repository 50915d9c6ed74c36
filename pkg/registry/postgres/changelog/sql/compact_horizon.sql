-- The change feed's horizon: the oldest resourceVersion it can resume from.
SELECT compacted_rv FROM registry_change_horizon
