-- Member $1's recorded identity (kube-system uid), NULL if none yet.
SELECT identity FROM discovery_member WHERE cluster_id = $1
