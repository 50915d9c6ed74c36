-- Takes the first free one of the registry's write slots (write_slots.go):
-- $1 WriteSlotClass, $2 how many there are; held to the end of the
-- transaction. NULL when every slot is taken. LIMIT 1 stops the scan at the
-- first lock taken, so no other is.
SELECT (SELECT s FROM generate_series(0, $2::int - 1) AS s WHERE pg_try_advisory_xact_lock($1, s) LIMIT 1)
