package pgdb

// DSNSetting returns a setting of a URL or keyword/value DSN (e.g.
// "sslmode"), or, when the DSN leaves it out, the environment variable
// libpq takes it from (e.g. "PGSSLMODE"); "" if neither sets it.
func DSNSetting(dsn, key, env string) string { return dsnSetting(dsn, key, env) }
