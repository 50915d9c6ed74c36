-- For each function source named in $1 (text[]): the sha256 of its file and
-- of its function's definition as recorded when it was last applied (NULL
-- if never), and the sha256 of the definition now (NULL: no such function).
SELECT n.name, s.sha256, s.definition_sha256,
	(SELECT encode(sha256(convert_to(string_agg(pg_get_functiondef(p.oid), E'\n' ORDER BY p.oid::regprocedure::text), 'UTF8')), 'hex')
	 FROM pg_proc p
	 WHERE p.proname = n.name AND p.pronamespace = current_schema()::regnamespace AND p.prokind IN ('f', 'p'))
FROM unnest($1::text[]) AS n(name)
LEFT JOIN registry_schema_sources s ON s.name = n.name
