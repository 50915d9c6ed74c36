// Package pgdb is the floor of the registry's PostgreSQL storage: what
// every mechanism above it uses to reach the database — pools of
// connections (Pool: acquire timeouts, busy answers, cutting every
// connection after a failover, their metrics), connecting (timeouts, the
// dead-peer dialer, TLS errors that name the setting to fix, DSN files and
// their rotated credentials), the mapping of PostgreSQL's errors to the
// store's, and the loader of each package's embedded SQL statements.
package pgdb
