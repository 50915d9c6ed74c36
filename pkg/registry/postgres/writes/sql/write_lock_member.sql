-- A member's lock (write.go): $1 MemberLockClass, $2 the cluster id; held to
-- the end of the transaction.
SELECT pg_advisory_xact_lock($1, hashtext($2))
