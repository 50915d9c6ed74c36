-- The versions of the applied migrations.
SELECT version FROM schema_migrations
