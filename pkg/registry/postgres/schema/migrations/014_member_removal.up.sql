-- Member removal decided once, by the registry (issue 19, docs/discovery.md,
-- "Members"). absent_since: since when no replica's configuration lists the
-- member (the first view that missed it; a view that lists it clears it).
-- removed_at: when the registry removed it, once absent for the grace
-- period: its objects were deleted and its epoch renewed in the same
-- transaction, and it is not claimed again until a configuration lists it
-- anew. Its usage history stays, to expire with the retention.
ALTER TABLE discovery_member
    ADD COLUMN absent_since timestamptz,
    ADD COLUMN removed_at   timestamptz;
