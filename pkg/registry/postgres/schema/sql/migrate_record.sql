-- Records migration $1 (version), $2 (name) as applied.
INSERT INTO schema_migrations (version, name) VALUES ($1, $2)
