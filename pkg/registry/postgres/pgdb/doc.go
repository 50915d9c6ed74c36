// Package pgdb is the floor of the registry's PostgreSQL storage: what
// every mechanism above it uses to talk to the database — the mapping of
// PostgreSQL's errors to the store's, and the loader of each package's
// embedded SQL statements.
package pgdb
