-- Every member's mirror heartbeat (migration 027), for the tables that show
-- a member's data age beside its objects.
SELECT cluster_id, complete_as_of FROM cluster_capacity WHERE complete_as_of IS NOT NULL
