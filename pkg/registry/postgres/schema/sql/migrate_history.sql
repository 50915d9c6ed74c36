-- The applied migrations, with names and times, for `migrate status`.
SELECT version, name, applied_at FROM schema_migrations
