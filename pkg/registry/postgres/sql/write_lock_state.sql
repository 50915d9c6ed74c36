-- The writer lock (write.go): the single registry_state row, held to commit,
-- and the registry resourceVersion when it was taken.
SELECT resource_version FROM registry_state FOR UPDATE
