package pgdb

import "testing"

func TestDSNSetting(t *testing.T) {
	t.Setenv("PGSSLROOTCERT", "/from/env.crt")
	for _, tc := range []struct{ dsn, want string }{
		{"postgres://u@h/db?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.crt", "/etc/ca.crt"},
		{"postgresql://u@h1:5432,h2:5433/db?sslrootcert=/a.crt", "/a.crt"},
		{"host=h sslrootcert=/etc/ca.crt dbname=db", "/etc/ca.crt"},
		{"host=h sslrootcert = '/dir with space/it\\'s.crt' dbname=db", "/dir with space/it's.crt"},
		{"host=h password='a b' sslrootcert=/x", "/x"},
		{"host=h dbname=db", "/from/env.crt"},
		{"postgres://u@h/db", "/from/env.crt"},
	} {
		if got := dsnSetting(tc.dsn, "sslrootcert", "PGSSLROOTCERT"); got != tc.want {
			t.Errorf("dsnSetting(%q) = %q, want %q", tc.dsn, got, tc.want)
		}
	}
}
