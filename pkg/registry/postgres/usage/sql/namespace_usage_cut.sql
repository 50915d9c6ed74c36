-- Fragment (a CTE) of namespace_usage_due_names:
-- "cut", the time before which a namespace's usage that no sample has
-- confirmed becomes unknown: the scrape's newest sample (the member's
-- clock; the database's without one) less $5 seconds.
cut AS (
	SELECT coalesce(max(observed_at), statement_timestamp()) - make_interval(secs => $5::float8) AS at FROM input
)
