-- The function sources (schema/functions/<name>.sql) applied to this
-- database: the sha256 of the file and of its definition as applying it
-- left it (migrate_sources_state.sql).
CREATE TABLE IF NOT EXISTS registry_schema_sources (
	name              text COLLATE "C" PRIMARY KEY,
	sha256            text NOT NULL,
	definition_sha256 text NOT NULL,
	applied_at        timestamptz NOT NULL DEFAULT now()
)
