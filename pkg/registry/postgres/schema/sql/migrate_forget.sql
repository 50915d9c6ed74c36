-- Records migration $1 (version) as reverted.
DELETE FROM schema_migrations WHERE version = $1
