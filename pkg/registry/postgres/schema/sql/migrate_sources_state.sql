-- For each function source named in $1 (text[]): the sha256 of its file and
-- of its definition as recorded when it was last applied (NULL if never),
-- and the sha256 of its definition now: the function's (pg_get_functiondef),
-- with the triggers that run it and the aggregates it steps (NULL: no such
-- function).
SELECT n.name, s.sha256, s.definition_sha256,
	(SELECT encode(sha256(convert_to(string_agg(d.def, E'\n' ORDER BY d.def), 'UTF8')), 'hex')
	 FROM pg_proc p
	 CROSS JOIN LATERAL (
		SELECT pg_get_functiondef(p.oid)
		UNION ALL
		SELECT pg_get_triggerdef(g.oid) FROM pg_trigger g WHERE g.tgfoid = p.oid AND NOT g.tgisinternal
		UNION ALL
		SELECT 'AGGREGATE ' || a.aggfnoid::regprocedure::text FROM pg_aggregate a WHERE a.aggtransfn = p.oid
	 ) AS d(def)
	 WHERE p.proname = n.name AND p.pronamespace = current_schema()::regnamespace AND p.prokind IN ('f', 'p'))
FROM unnest($1::text[]) AS n(name)
LEFT JOIN registry_schema_sources s ON s.name = n.name
