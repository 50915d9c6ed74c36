DROP TABLE registry_task;
DELETE FROM discovery_member WHERE identity IS NULL;
ALTER TABLE discovery_member
    DROP COLUMN owner,
    DROP COLUMN epoch,
    ALTER COLUMN identity SET NOT NULL;
DROP SEQUENCE discovery_member_epoch;
