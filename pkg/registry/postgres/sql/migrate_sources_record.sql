-- Records function source $1 (name) as applied now, from a file of sha256
-- $2, leaving its function's definition with sha256 $3.
INSERT INTO registry_schema_sources (name, sha256, definition_sha256) VALUES ($1, $2, $3)
ON CONFLICT (name) DO UPDATE SET sha256 = excluded.sha256, definition_sha256 = excluded.definition_sha256, applied_at = now()
