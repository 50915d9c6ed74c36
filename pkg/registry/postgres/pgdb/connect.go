package pgdb

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// Connection handling (docs/registry.md, "Connecting to PostgreSQL"): what
// the pool does on top of what pgx already honours in the DSN (sslmode,
// sslrootcert, several hosts with target_session_attrs).

// A statement that runs longer than this is cancelled (SQLSTATE 57014,
// store.ErrTimeout), so a stuck query cannot hold a connection, and the
// locks it took, for good. A minute is kube-apiserver's own request
// timeout: nothing the registry serves waits longer. A DSN that sets
// statement_timeout (or passes it in options=-c...) keeps its value.
// Migrations run without it (LiftStatementTimeout).
const (
	statementTimeoutParam   = "statement_timeout"
	defaultStatementTimeout = "60s"
)

// DefaultConnectTimeout bounds one connection attempt to one host (pgx's
// connect_timeout) unless the DSN sets connect_timeout: pgxpool would wait
// two minutes for a host that drops packets, and with several hosts the
// next one is tried only after it. It is shorter than the change feed's
// read timeout (10 s), so after a failover that left the old primary
// hung, a read that must connect anew gives up on the first host and
// reaches the next within its deadline.
const DefaultConnectTimeout = 5 * time.Second

// ConnOptions tunes the connections ConfigureConnections sets up.
type ConnOptions struct {
	// DSNFile is the file the DSN was read from (--postgres-dsn-file): new
	// connections use the credentials it holds when they are made.
	DSNFile string
	// TCPUserTimeout and TCPKeepAlive make connections notice a peer that
	// vanished without a reset (deadPeerDialer); zero: the defaults
	// (DefaultTCPUserTimeout, DefaultTCPKeepAlive), negative: off.
	TCPUserTimeout time.Duration
	TCPKeepAlive   time.Duration
}

// ConfigureConnections applies the store's connection handling to cfg, as
// parsed from dsn: the default statement and connect timeouts, certificate
// errors that say which setting to fix, and, with opts.DSNFile, new
// connections that use the credentials the file holds when they are made.
func ConfigureConnections(cfg *pgxpool.Config, dsn string, opts ConnOptions) {
	applyConnectionDefaults(cfg.ConnConfig, dsn)
	cfg.ConnConfig.DialFunc = deadPeerDialer(opts.TCPUserTimeout, opts.TCPKeepAlive).DialContext
	if opts.DSNFile != "" {
		cfg.BeforeConnect = newDSNFileReloader(opts.DSNFile, dsn).beforeConnect
	}
}

// applyConnectionDefaults sets the defaults the DSN leaves open and makes
// TLS verification failures explain themselves.
func applyConnectionDefaults(cc *pgx.ConnConfig, dsn string) {
	if _, set := cc.RuntimeParams[statementTimeoutParam]; !set && !strings.Contains(cc.RuntimeParams["options"], statementTimeoutParam) {
		cc.RuntimeParams[statementTimeoutParam] = defaultStatementTimeout
	}
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = DefaultConnectTimeout
	}
	explainTLSErrors(cc, dsnSetting(dsn, "sslrootcert", "PGSSLROOTCERT"))
}

// Defaults of ConnOptions.TCPUserTimeout and ConnOptions.TCPKeepAlive: a
// host that stops acknowledging (powered off, black-holed, a paused VM) is
// given up on within about 20 s, an idle connection to it within about 25 s
// (10 s idle, then 3 probes 5 s apart), instead of the kernel's 15 minutes
// of retransmissions and 2 hours before the first keepalive probe.
const (
	DefaultTCPUserTimeout = 20 * time.Second
	DefaultTCPKeepAlive   = 10 * time.Second
)

// deadPeerDialer dials with TCP keepalive (first probe after keepAlive
// idle, then every keepAlive/2, given up after 3 unanswered) and
// TCP_USER_TIMEOUT (data unacknowledged for userTimeout closes the
// connection), so a connection whose peer vanished without a reset fails
// instead of waiting for good. Zero takes the default; negative turns the
// setting off. Neither notices a server process that is stopped while its
// host's kernel still acknowledges (SIGSTOP): that takes the deadlines of
// the reads themselves (the change feed's --watch-feed-read-timeout, the
// request's timeout, the statement timeout).
func deadPeerDialer(userTimeout, keepAlive time.Duration) *net.Dialer {
	if userTimeout == 0 {
		userTimeout = DefaultTCPUserTimeout
	}
	if keepAlive == 0 {
		keepAlive = DefaultTCPKeepAlive
	}
	d := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: keepAlive > 0, Idle: keepAlive, Interval: keepAlive / 2, Count: 3}}
	if keepAlive < 0 {
		d.KeepAlive = -1
	}
	if userTimeout > 0 {
		ms := int(userTimeout / time.Millisecond)
		d.Control = func(network, _ string, c syscall.RawConn) error {
			if network != "tcp" && network != "tcp4" && network != "tcp6" {
				return nil // a unix socket: no peer to lose
			}
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, ms)
			}); err != nil {
				return err
			}
			return serr
		}
	}
	return d
}

// ConnConfig is the configuration a new connection outside the pool
// should use: the pool's, with the credentials the DSN file holds now.
func (p *Pool) ConnConfig(ctx context.Context) (*pgx.ConnConfig, error) {
	cfg := p.Config()
	if cfg.BeforeConnect != nil {
		if err := cfg.BeforeConnect(ctx, cfg.ConnConfig); err != nil {
			return nil, err
		}
	}
	return cfg.ConnConfig, nil
}

// LiftStatementTimeout turns the statement timeout off for conn's session:
// migrations, and the wait for another replica's, may take longer than any
// request. RestoreStatementTimeout (deferred) puts the session's default
// back before the connection returns to the pool.
func LiftStatementTimeout(ctx context.Context, conn *pgxpool.Conn) error {
	if _, err := conn.Exec(ctx, "SET statement_timeout = 0"); err != nil {
		return fmt.Errorf("lift the statement timeout: %w", InterpretError(err))
	}
	return nil
}

// RestoreStatementTimeout resets the statement timeout to the session's
// default (the DSN's or ours); if that fails the connection is closed, so
// it does not return to the pool without a timeout.
func RestoreStatementTimeout(ctx context.Context, conn *pgxpool.Conn) {
	ctx = context.WithoutCancel(ctx)
	if _, err := conn.Exec(ctx, "RESET statement_timeout"); err != nil {
		_ = conn.Conn().Close(ctx)
	}
}

// TLS

// explainTLSErrors makes every certificate check of cc (one TLS config per
// host) fail with a tlsVerifyError, which names the setting to fix, instead
// of crypto/x509's bare "certificate signed by unknown authority". The
// checks are the same: sslmode=verify-full verifies the chain against
// sslrootcert (or the system's CAs) and the host name, exactly as
// crypto/tls would; verify-ca (and require with sslrootcert) keeps pgx's
// own chain-only check and only rewords its error. Modes that verify
// nothing stay as they are.
func explainTLSErrors(cc *pgx.ConnConfig, rootCert string) {
	seen := map[*tls.Config]bool{}
	wrap := func(tc *tls.Config) {
		if tc == nil || seen[tc] {
			return
		}
		seen[tc] = true
		switch {
		case !tc.InsecureSkipVerify: // verify-full
			host, roots, now := tc.ServerName, tc.RootCAs, tc.Time
			if now == nil {
				now = time.Now
			}
			tc.InsecureSkipVerify = true // verified below, as crypto/tls would
			tc.VerifyConnection = func(cs tls.ConnectionState) error {
				return explainCertificateError(verifyChain(cs.PeerCertificates, roots, host, now()), host, rootCert)
			}
		case tc.VerifyPeerCertificate != nil: // verify-ca
			verify := tc.VerifyPeerCertificate
			tc.VerifyPeerCertificate = func(raw [][]byte, chains [][]*x509.Certificate) error {
				return explainCertificateError(verify(raw, chains), "", rootCert)
			}
		}
	}
	wrap(cc.TLSConfig)
	for _, fb := range cc.Fallbacks {
		wrap(fb.TLSConfig)
	}
}

// verifyChain is crypto/tls's verification of a server certificate: the
// chain up to roots (nil: the system's), and host (a name or IP address).
func verifyChain(certs []*x509.Certificate, roots *x509.CertPool, host string, now time.Time) error {
	if len(certs) == 0 {
		return errors.New("the server presented no certificate")
	}
	opts := x509.VerifyOptions{Roots: roots, DNSName: host, CurrentTime: now, Intermediates: x509.NewCertPool()}
	for _, c := range certs[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := certs[0].Verify(opts)
	return err
}

// tlsVerifyError is a server certificate the client refused, with what to
// change. It wraps the crypto/x509 error.
type tlsVerifyError struct {
	msg string
	err error
}

func (e *tlsVerifyError) Error() string { return e.msg + " (" + e.err.Error() + ")" }
func (e *tlsVerifyError) Unwrap() error { return e.err }

// explainCertificateError turns a failed certificate check into a
// tlsVerifyError; host is "" for verify-ca (no host name check).
func explainCertificateError(err error, host, rootCert string) error {
	if err == nil {
		return nil
	}
	const subject = "the registry database's TLS certificate"
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		msg       string
	)
	switch {
	case errors.As(err, &unknownCA):
		issuer := ""
		if unknownCA.Cert != nil {
			issuer = fmt.Sprintf(" (issued by %q)", unknownCA.Cert.Issuer.String())
		}
		switch rootCert {
		case "", "system":
			msg = fmt.Sprintf("%s%s is not signed by a CA this system trusts (the DSN sets no sslrootcert): "+
				"set sslrootcert in --postgres-dsn to the file of the CA that issued it, or check sslmode", subject, issuer)
		default:
			msg = fmt.Sprintf("%s%s is not signed by the CA in sslrootcert=%s: "+
				"check --postgres-dsn's sslrootcert (the CA that issued the server's certificate) or sslmode", subject, issuer, rootCert)
		}
	case errors.As(err, &hostname):
		names := []string{}
		if c := hostname.Certificate; c != nil {
			names = append(names, c.DNSNames...)
			for _, ip := range c.IPAddresses {
				names = append(names, ip.String())
			}
		}
		msg = fmt.Sprintf("%s is not valid for the host %q the DSN connects to (it is for %s): "+
			"connect with a host name the certificate lists (--postgres-dsn's host), or set sslmode=verify-ca to check only the CA",
			subject, host, strings.Join(names, ", "))
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		msg = subject + " has expired or is not valid yet: renew the server's certificate, or check this machine's clock"
	default:
		msg = fmt.Sprintf("%s failed verification (sslrootcert=%s): check the server's certificate and --postgres-dsn's sslrootcert and sslmode", subject, rootCert)
	}
	return &tlsVerifyError{msg: msg, err: err}
}

// dsnSetting returns a setting of a URL or keyword/value DSN, or the
// environment variable libpq takes it from; "" if neither sets it.
func dsnSetting(dsn, key, env string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		// Not url.Parse: a multi-host URL (h1:5432,h2:5432) is no valid URL.
		if _, query, ok := strings.Cut(dsn, "?"); ok {
			if v, err := url.ParseQuery(query); err == nil && v.Has(key) {
				return v.Get(key)
			}
		}
	} else if v, ok := keywordValueSettings(dsn)[key]; ok {
		return v
	}
	return os.Getenv(env)
}

// keywordValueSettings parses a libpq keyword/value connection string
// (key=value, key = 'quoted \' value'); it stops at the first malformed
// pair, as ParseConfig has accepted the string before.
func keywordValueSettings(s string) map[string]string {
	out := map[string]string{}
	for {
		s = strings.TrimLeft(s, " \t\n\r\v\f")
		if s == "" {
			return out
		}
		key, rest, ok := strings.Cut(s, "=")
		if !ok {
			return out
		}
		key = strings.TrimSpace(key)
		rest = strings.TrimLeft(rest, " \t\n\r\v\f")
		var val strings.Builder
		quoted := strings.HasPrefix(rest, "'")
		if quoted {
			rest = rest[1:]
		}
		i := 0
		for ; i < len(rest); i++ {
			c := rest[i]
			if c == '\\' && i+1 < len(rest) {
				i++
				val.WriteByte(rest[i])
				continue
			}
			if (quoted && c == '\'') || (!quoted && strings.IndexByte(" \t\n\r\v\f", c) >= 0) {
				break
			}
			val.WriteByte(c)
		}
		if quoted && i < len(rest) {
			i++ // the closing quote
		}
		out[key] = val.String()
		s = rest[i:]
	}
}

// The DSN file

// ReadDSNFile reads a DSN from file (surrounding whitespace ignored) and
// checks that it parses.
func ReadDSNFile(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	dsn := strings.TrimSpace(string(b))
	if dsn == "" {
		return "", fmt.Errorf("%s is empty", file)
	}
	if _, err := pgxpool.ParseConfig(dsn); err != nil {
		return "", fmt.Errorf("%s: %w (expected postgres://user@host:port/db or host=... dbname=...)", file, err)
	}
	return dsn, nil
}

// dsnFileReloader gives every new pool connection the credentials that the
// DSN file (--postgres-dsn-file, a mounted Secret) holds when the
// connection is made, so a rotated password is used without a restart:
// connections made before keep theirs (PostgreSQL checks a password only
// when a session starts). The file is a few hundred bytes, read at each new
// connection and parsed only when its content changed. A file that cannot
// be read or parsed keeps the last good credentials, and says so in the log
// once per distinct problem.
type dsnFileReloader struct {
	path string

	mu       sync.Mutex
	applied  [sha256.Size]byte // hash of the content in use
	user     string
	password string
	others   string // the settings besides the credentials, to tell that they changed
	failed   string // the last problem logged, not logged again until another one
}

// newDSNFileReloader starts from dsn, the file's content when the store
// was opened.
func newDSNFileReloader(path, dsn string) *dsnFileReloader {
	r := &dsnFileReloader{path: path, applied: sha256.Sum256([]byte(strings.TrimSpace(dsn)))}
	if cfg, err := pgxpool.ParseConfig(dsn); err == nil { // Open parsed it already
		r.user, r.password, r.others = cfg.ConnConfig.User, cfg.ConnConfig.Password, otherSettings(cfg)
	}
	return r
}

// beforeConnect is the pool's BeforeConnect hook.
func (r *dsnFileReloader) beforeConnect(ctx context.Context, cc *pgx.ConnConfig) error {
	cc.User, cc.Password = r.credentials(ctx)
	return nil
}

// credentials returns the user and password for a new connection.
func (r *dsnFileReloader) credentials(ctx context.Context) (user, password string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	logger := klog.FromContext(ctx).WithValues("file", r.path)
	b, err := os.ReadFile(r.path)
	if err != nil {
		r.fail(logger, err, "Cannot read the registry DSN file; new connections keep the last credentials read from it")
		return r.user, r.password
	}
	content := strings.TrimSpace(string(b))
	sum := sha256.Sum256([]byte(content))
	if sum == r.applied {
		r.failed = ""
		return r.user, r.password
	}
	if content == "" {
		r.fail(logger, errors.New("the file is empty"), "Cannot use the registry DSN file; new connections keep the last credentials read from it")
		return r.user, r.password
	}
	cfg, err := pgxpool.ParseConfig(content)
	if err != nil {
		r.fail(logger, withoutConnString(err), "Cannot parse the registry DSN file; new connections keep the last credentials read from it")
		return r.user, r.password
	}
	others := otherSettings(cfg)
	logger.Info("Registry DSN file changed; new connections use its credentials", "user", cfg.ConnConfig.User,
		"passwordChanged", cfg.ConnConfig.Password != r.password)
	if others != r.others {
		logger.Info("Registry DSN file changed more than the credentials; the other settings (hosts, database, TLS, parameters, pool) take effect when the server restarts")
	}
	r.applied, r.user, r.password, r.others, r.failed = sum, cfg.ConnConfig.User, cfg.ConnConfig.Password, others, ""
	return r.user, r.password
}

// fail logs a problem with the file unless it was the last one logged.
func (r *dsnFileReloader) fail(logger klog.Logger, err error, msg string) {
	if key := msg + err.Error(); key != r.failed {
		r.failed = key
		logger.Error(err, msg)
	}
}

// withoutConnString drops the connection string from a parse error: pgconn
// masks the password in it only as far as it can parse the string.
func withoutConnString(err error) error {
	msg := err.Error()
	if _, ok := errors.AsType[*pgconn.ParseConfigError](err); ok {
		if i := strings.LastIndex(msg, "`: "); i >= 0 {
			msg = msg[i+3:]
		}
	}
	return errors.New("cannot parse the DSN: " + msg)
}

// otherSettings summarizes what a DSN sets besides the credentials, to
// notice a change that needs a restart.
func otherSettings(cfg *pgxpool.Config) string {
	cc := cfg.ConnConfig
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d/%s pool=%d-%d", cc.Host, cc.Port, cc.Database, cfg.MinConns, cfg.MaxConns)
	for _, fb := range cc.Fallbacks {
		fmt.Fprintf(&b, ",%s:%d", fb.Host, fb.Port)
	}
	tlsMode := func(tc *tls.Config) string {
		switch {
		case tc == nil:
			return " notls"
		case !tc.InsecureSkipVerify:
			return " verify-full:" + tc.ServerName
		case tc.VerifyPeerCertificate != nil:
			return " verify-ca"
		default:
			return " tls"
		}
	}
	b.WriteString(tlsMode(cc.TLSConfig))
	for _, k := range slices.Sorted(maps.Keys(cc.RuntimeParams)) {
		fmt.Fprintf(&b, " %s=%s", k, cc.RuntimeParams[k])
	}
	fmt.Fprintf(&b, " timeout=%s", cc.ConnectTimeout)
	return b.String()
}
