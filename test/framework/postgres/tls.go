package postgres

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TLSOptions tunes EnableTLS. The zero value is fine.
type TLSOptions struct {
	// Hosts are the names and IP addresses the server certificate is valid
	// for; default 127.0.0.1, ::1 and localhost. A test of a hostname
	// mismatch names something else.
	Hosts []string
}

// File names under <instance dir>/tls.
const (
	tlsDirName     = "tls"
	caCertFile     = "ca.crt"
	caKeyFile      = "ca.key"
	serverCertFile = "server.crt"
	serverKeyFile  = "server.key"
)

// EnableTLS makes the running server serve TLS (ssl=on, reloaded, no
// restart) with a server certificate signed by a CA generated for this
// instance; certificate, key and CA are files in the instance's dir
// (CAFile names the CA). Connections without TLS are still accepted, so
// DSN keeps working; TLSDSN verifies the server. Called again, it issues a
// new server certificate (for opts.Hosts) from the same CA. It returns once
// a connection with sslmode=verify-full succeeds, unless opts.Hosts leaves
// out 127.0.0.1 (then once the server has reloaded).
func (i *Instance) EnableTLS(ctx context.Context, opts TLSOptions) error {
	hosts := opts.Hosts
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "::1", "localhost"}
	}
	dir := filepath.Join(i.dir, tlsDirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := i.run.ownFile(dir); err != nil {
		return err
	}
	ca, err := loadOrCreateCA(dir)
	if err != nil {
		return err
	}
	certPEM, keyPEM, err := ca.issueServer(hosts)
	if err != nil {
		return err
	}
	for name, content := range map[string][]byte{serverCertFile: certPEM, serverKeyFile: keyPEM} {
		if err := i.writeOwned(filepath.Join(dir, name), content); err != nil {
			return err
		}
	}
	reloads := i.reloadCount()
	err = i.query(ctx, func(conn *pgx.Conn) error {
		for _, stmt := range []string{
			"ALTER SYSTEM SET ssl_cert_file = " + quoteLiteral(filepath.Join(dir, serverCertFile)),
			"ALTER SYSTEM SET ssl_key_file = " + quoteLiteral(filepath.Join(dir, serverKeyFile)),
			"ALTER SYSTEM SET ssl = on",
			"SELECT pg_reload_conf()",
		} {
			if _, err := conn.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("%s: %w", stmt, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("enable TLS on port %d: %w", i.port, err)
	}
	if err := i.waitReloaded(ctx, reloads); err != nil {
		return err
	}
	if !slices.Contains(hosts, "127.0.0.1") {
		return nil
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, i.timeout, true, func(ctx context.Context) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		conn, err := pgx.Connect(cctx, i.TLSDSN())
		if last = err; err != nil {
			return false, nil
		}
		var ssl bool
		err = conn.QueryRow(cctx, `SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&ssl)
		_ = conn.Close(cctx)
		if last = err; err == nil && !ssl {
			last = errors.New("connected without TLS")
		}
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("postgres on port %d does not serve TLS: %w (last: %w)%s", i.port, err, last, i.logTail())
	}
	return nil
}

// CAFile is the CA certificate (PEM) that signed the server certificate,
// for sslrootcert; "" before EnableTLS.
func (i *Instance) CAFile() string {
	p := filepath.Join(i.dir, tlsDirName, caCertFile)
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// TLSDSN is DSN with sslmode=verify-full and sslrootcert=CAFile: the
// connection fails unless the server presents a certificate for 127.0.0.1
// signed by the instance's CA.
func (i *Instance) TLSDSN() string {
	return i.urlDSN("postgres", url.Values{"sslmode": {"verify-full"}, "sslrootcert": {i.CAFile()}})
}

// WriteTestCA writes a new self-signed CA certificate to dir/name and
// returns its path: a CA that signed nothing, to show that sslrootcert
// naming the wrong CA fails.
func WriteTestCA(dir, name string) (string, error) {
	ca, err := newTestCA("pgtest unrelated CA")
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, ca.certPEM, 0o644); err != nil {
		return "", err
	}
	return p, nil
}

// AddHBARule puts rule (a pg_hba.conf line, e.g. "host all app
// 127.0.0.1/32 scram-sha-256") first in the server's pg_hba.conf, ahead of
// the trust rules initdb wrote, and reloads. Standbys started afterwards
// copy it.
func (i *Instance) AddHBARule(ctx context.Context, rule string) error {
	p := filepath.Join(i.dir, "data", "pg_hba.conf")
	old, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if err := i.writeOwned(p, append([]byte(rule+"\n"), old...)); err != nil {
		return err
	}
	return i.Reload(ctx)
}

// Reload makes the server re-read its configuration files
// (pg_reload_conf) and waits until the postmaster has.
func (i *Instance) Reload(ctx context.Context) error {
	reloads := i.reloadCount()
	if err := i.query(ctx, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "SELECT pg_reload_conf()")
		return err
	}); err != nil {
		return fmt.Errorf("reload postgres on port %d: %w", i.port, err)
	}
	return i.waitReloaded(ctx, reloads)
}

// reloadCount counts the reloads the postmaster logged.
func (i *Instance) reloadCount() int {
	b, _ := os.ReadFile(i.logPath)
	return strings.Count(string(b), "received SIGHUP, reloading configuration files")
}

// waitReloaded waits until the log shows more reloads than before, and
// reports a configuration file the server could not load.
func (i *Instance) waitReloaded(ctx context.Context, before int) error {
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return i.reloadCount() > before, nil
	})
	if err != nil {
		return fmt.Errorf("postgres on port %d did not reload: %w%s", i.port, err, i.logTail())
	}
	// Errors in the files are logged right after the reload line.
	time.Sleep(20 * time.Millisecond)
	b, _ := os.ReadFile(i.logPath)
	tail := string(b)
	if n := strings.LastIndex(tail, "received SIGHUP"); n >= 0 {
		tail = tail[n:]
	}
	if strings.Contains(tail, "not reloaded") || strings.Contains(tail, "could not load") {
		return fmt.Errorf("postgres on port %d rejected its configuration:\n%s", i.port, tail)
	}
	return nil
}

// copyTLSFrom gives a standby cloned from primary its own copy of the
// primary's TLS files and returns the postgresql.auto.conf lines pointing
// at them ("" if the primary serves no TLS).
func (i *Instance) copyTLSFrom(primary *Instance) (string, error) {
	from := filepath.Join(primary.dir, tlsDirName)
	if _, err := os.Stat(from); err != nil {
		return "", nil
	}
	to := filepath.Join(i.dir, tlsDirName)
	if err := os.MkdirAll(to, 0o700); err != nil {
		return "", err
	}
	if err := i.run.ownFile(to); err != nil {
		return "", err
	}
	for _, name := range []string{caCertFile, caKeyFile, serverCertFile, serverKeyFile} {
		b, err := os.ReadFile(filepath.Join(from, name))
		if err != nil {
			return "", err
		}
		if err := i.writeOwned(filepath.Join(to, name), b); err != nil {
			return "", err
		}
	}
	return "ssl_cert_file = " + quoteLiteral(filepath.Join(to, serverCertFile)) + "\n" +
		"ssl_key_file = " + quoteLiteral(filepath.Join(to, serverKeyFile)) + "\n", nil
}

// writeOwned writes a private file the server's user owns.
func (i *Instance) writeOwned(path string, content []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, content, 0o600); err != nil {
		return err
	}
	if err := i.run.ownFile(tmp); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// testCA is a CA generated for a test.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newTestCA(cn string) (*testCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// loadOrCreateCA reads the instance's CA from dir, or creates it there.
func loadOrCreateCA(dir string) (*testCA, error) {
	certPEM, cerr := os.ReadFile(filepath.Join(dir, caCertFile))
	keyPEM, kerr := os.ReadFile(filepath.Join(dir, caKeyFile))
	if cerr == nil && kerr == nil {
		cb, _ := pem.Decode(certPEM)
		kb, _ := pem.Decode(keyPEM)
		if cb == nil || kb == nil {
			return nil, fmt.Errorf("CA files in %s are not PEM", dir)
		}
		cert, err := x509.ParseCertificate(cb.Bytes)
		if err != nil {
			return nil, err
		}
		key, err := x509.ParseECPrivateKey(kb.Bytes)
		if err != nil {
			return nil, err
		}
		return &testCA{cert: cert, key: key, certPEM: certPEM}, nil
	}
	ca, err := newTestCA("pgtest CA")
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(ca.key)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, caKeyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	// World-readable: clients (the tests) read it as sslrootcert.
	if err := os.WriteFile(filepath.Join(dir, caCertFile), ca.certPEM, 0o644); err != nil {
		return nil, err
	}
	return ca, nil
}

// issueServer signs a server certificate for hosts; it returns the
// certificate and its key as PEM.
func (ca *testCA) issueServer(hosts []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("create server certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

func randomSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
