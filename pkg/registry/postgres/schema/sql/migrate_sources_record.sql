-- Records the function sources named in $1 (text[]) as applied now, from
-- files of sha256 $2 (text[]), leaving their functions' definitions with
-- sha256 $3 (text[]).
INSERT INTO registry_schema_sources (name, sha256, definition_sha256)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
ON CONFLICT (name) DO UPDATE SET sha256 = excluded.sha256, definition_sha256 = excluded.definition_sha256, applied_at = now()
