ALTER TABLE cluster_capacity DROP COLUMN last_change_at;
