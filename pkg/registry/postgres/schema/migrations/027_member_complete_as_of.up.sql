-- Freshness measured end to end (issue 50): a member's owner heartbeats, at
-- most once a minute (RecordMemberState), the member time up to which the
-- registry holds every change of every mirrored resource: the arrival of the
-- newest watch event or bookmark whose batch and cursor committed, the
-- minimum over the member's resources. Readers judge staleness from its age
-- (--member-stale-after), so a member whose writer cannot write is shown
-- Stale even though nothing could record it.
ALTER TABLE cluster_capacity ADD COLUMN complete_as_of timestamptz;
SELECT registry_define_log_update('cluster_capacity', 'ClusterCapacity');
