-- Listens on the channel registry_state's trigger notifies on each commit
-- that published a new registry version (migration 002).
LISTEN registry_change
