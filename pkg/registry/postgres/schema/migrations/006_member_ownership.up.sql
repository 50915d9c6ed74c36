-- Ownership of member clusters, for fenced discovery writes (docs/registry.md,
-- "Writers and ownership"). A replica that starts mirroring a member claims
-- it: the member's epoch becomes a fresh value of discovery_member_epoch, and
-- every later discovery write of that member must carry it. Epochs come
-- from a sequence, so they are never reused, not even after the member's
-- rows are deleted and it is claimed again.
CREATE SEQUENCE discovery_member_epoch AS bigint;

ALTER TABLE discovery_member
    ALTER COLUMN identity DROP NOT NULL,
    ADD COLUMN epoch bigint NOT NULL DEFAULT 0,
    -- the replica identity that claimed the member (for people, not checks)
    ADD COLUMN owner text;

-- Registry-wide periodic tasks that one replica runs per interval.
CREATE TABLE registry_task (
    name     text COLLATE "C" PRIMARY KEY,
    last_run timestamptz NOT NULL
);
