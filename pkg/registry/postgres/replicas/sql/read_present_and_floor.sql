-- The primary's registry resourceVersion and the first resourceVersion of
-- its timeline after the last failover (0 before any).
SELECT s.resource_version, e.floor
FROM (SELECT resource_version FROM registry_state LIMIT 1) s, (SELECT floor FROM registry_epoch LIMIT 1) e
