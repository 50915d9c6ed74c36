-- Forgets the function sources not named in $1 (text[]): files this binary
-- no longer has.
DELETE FROM registry_schema_sources WHERE name <> ALL ($1::text[])
