-- Fragment (a CTE) of namespace_usage_due_names and namespace_report_usage:
-- "input", member $1's namespace samples in $2 (JSON array of
-- namespaceSampleRow).
input AS (
	SELECT * FROM jsonb_to_recordset($2::jsonb)
		AS s(namespace text, cpu_usage_nanocores bigint, memory_usage_bytes bigint, pods bigint, observed_at timestamptz)
)
