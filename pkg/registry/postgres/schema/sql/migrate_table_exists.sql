-- Whether schema_migrations exists (nothing is applied without it).
SELECT to_regclass('schema_migrations') IS NOT NULL
