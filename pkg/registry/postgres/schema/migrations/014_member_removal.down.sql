DELETE FROM discovery_member WHERE removed_at IS NOT NULL;
ALTER TABLE discovery_member
    DROP COLUMN removed_at,
    DROP COLUMN absent_since;
