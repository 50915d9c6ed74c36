-- How long dropping a history partition waits for its parent's lock (inserts
-- hold it for milliseconds); on timeout the drop is retried at the next
-- maintenance.
SET LOCAL lock_timeout = '5s'
