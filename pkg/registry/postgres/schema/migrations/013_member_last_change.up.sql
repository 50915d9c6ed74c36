-- When the registry last mirrored a change of the member (issue 12: the age
-- of the last change seen), reported by the member's discovery writer with
-- a minute's resolution (RecordMemberState), so a busy member's
-- ClusterCapacity takes at most one version a minute for it.
ALTER TABLE cluster_capacity ADD COLUMN last_change_at timestamptz;
