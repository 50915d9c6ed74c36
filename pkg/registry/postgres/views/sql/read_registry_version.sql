-- The registry resourceVersion: that of the latest committed change.
SELECT resource_version FROM registry_state
