package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// StandbyOptions tunes StartStandby. The zero value is fine.
type StandbyOptions struct {
	// Name is the standby's application_name on the primary (its row in
	// pg_stat_replication, what synchronous_standby_names lists) and the
	// name of its physical replication slot; lowercase letters, digits and
	// underscores. Default: standby_<port>.
	Name string
}

// Standby is a streaming standby of an Instance: a server of its own (its
// own data dir and port, so every Instance method works on it) that
// replays the primary's WAL until it is promoted.
type Standby struct {
	*Instance
	// Primary is the instance it was cloned from and streams from.
	Primary *Instance
	// Name is its application_name and replication slot on the primary.
	Name string
}

var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// StartStandby clones the running instance with pg_basebackup (-X stream,
// -R: standby.signal and primary_conninfo written, a physical replication
// slot so the primary keeps the WAL the standby has not received) over
// 127.0.0.1, starts it on its own port and data dir, and returns once it
// accepts connections, is in recovery and streams from the primary. The
// caller stops it (Stop), independently of the primary. The primary's
// pg_hba.conf rules and TLS set-up are copied with the data dir; the
// standby serves TLS with its own copy of the primary's certificate.
func (i *Instance) StartStandby(ctx context.Context, opts StandbyOptions) (*Standby, error) {
	dir, err := os.MkdirTemp("", "pgtest-standby-")
	if err != nil {
		return nil, fmt.Errorf("create temp dir: %w", err)
	}
	if err := i.run.own(dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	inst := &Instance{dir: dir, bin: i.bin, run: i.run, timeout: i.timeout, logPath: filepath.Join(dir, "postgres.log"), exited: make(chan struct{})}
	// The port is picked now so the default name can carry it.
	if inst.port, err = freePort(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	name := opts.Name
	if name == "" {
		name = "standby_" + strconv.Itoa(inst.port)
	}
	if !slotName.MatchString(name) {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("standby name %q: want lowercase letters, digits and underscores (it names a replication slot)", name)
	}
	fail := func(err error) (*Standby, error) {
		_ = inst.Stop()
		i.dropSlot(name)
		return nil, err
	}
	if err := i.basebackup(ctx, inst, name); err != nil {
		return fail(err)
	}
	if err := inst.start(ctx, i.run, i.bin, i.timeout); err != nil {
		return fail(fmt.Errorf("start standby: %w", err))
	}
	s := &Standby{Instance: inst, Primary: i, Name: name}
	if err := s.waitStreaming(ctx); err != nil {
		return fail(err)
	}
	klog.FromContext(ctx).V(2).Info("Started ephemeral PostgreSQL standby", "dir", dir, "port", inst.port, "pid", inst.cmd.Process.Pid, "primaryPort", i.port, "name", name)
	return s, nil
}

// basebackup copies the primary into standby's data dir and configures it
// to stream from the primary.
func (i *Instance) basebackup(ctx context.Context, standby *Instance, name string) error {
	data := filepath.Join(standby.dir, "data")
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(i.bin, "pg_basebackup"),
		"-D", data,
		"-d", i.replicationConnString(name),
		"-X", "stream", "-R",
		"-C", "-S", name,
		"-c", "fast", "--no-sync")
	i.run.apply(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_basebackup from port %d: %w\n%s", i.port, err, out)
	}
	// pg_basebackup -R wrote standby.signal, primary_conninfo and
	// primary_slot_name; later lines of postgresql.auto.conf win, so name
	// the standby to the primary explicitly (application_name).
	extra := "primary_conninfo = '" + i.replicationConnString(name) + "'\n"
	tlsLines, err := standby.copyTLSFrom(i)
	if err != nil {
		return err
	}
	extra += tlsLines
	return appendFile(filepath.Join(data, "postgresql.auto.conf"), extra)
}

// replicationConnString is how a standby reaches the primary.
func (i *Instance) replicationConnString(name string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=%s sslmode=disable", i.port, name)
}

// waitStreaming waits until the standby is in recovery and its WAL
// receiver streams from the primary.
func (s *Standby) waitStreaming(ctx context.Context) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, s.timeout, true, func(ctx context.Context) (bool, error) {
		var inRecovery bool
		var status *string
		err := s.query(ctx, func(conn *pgx.Conn) error {
			return conn.QueryRow(ctx, `SELECT pg_is_in_recovery(), (SELECT status FROM pg_stat_wal_receiver)`).Scan(&inRecovery, &status)
		})
		switch {
		case err != nil:
			last = err.Error()
			return false, nil
		case !inRecovery:
			return false, errors.New("the standby is not in recovery (standby.signal missing?)")
		case status == nil || *status != "streaming":
			last = fmt.Sprintf("WAL receiver status %v", deref(status))
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("standby on port %d does not stream from port %d (%s): %w%s", s.port, s.Primary.port, last, err, s.logTail())
	}
	return nil
}

// Promote makes the standby a primary (pg_ctl promote) and waits until it
// has left recovery and accepts writes. It then no longer follows Primary.
func (s *Standby) Promote(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "pg_ctl"), "promote", "-w",
		"-t", strconv.Itoa(int(s.timeout.Seconds())), "-D", filepath.Join(s.dir, "data"))
	s.run.apply(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl promote (port %d): %w\n%s%s", s.port, err, out, s.logTail())
	}
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var inRecovery bool
		err := s.query(ctx, func(conn *pgx.Conn) error {
			return conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&inRecovery)
		})
		return err == nil && !inRecovery, nil
	})
	if err != nil {
		return fmt.Errorf("promoted standby on port %d still in recovery: %w%s", s.port, err, s.logTail())
	}
	return nil
}

// FailOverPaused is a failover that loses commits: it kills the primary
// (a crash), starts the standby again, stopped earlier with Pause so that it
// missed the primary's last commits, and promotes it.
func (s *Standby) FailOverPaused(ctx context.Context) error {
	if err := s.Primary.Kill(); err != nil {
		return err
	}
	if err := s.Resume(ctx); err != nil {
		return err
	}
	return s.Promote(ctx)
}

// ReplayLSN is the position up to which the standby has replayed the
// primary's WAL (pg_last_wal_replay_lsn): its data is what the primary had
// committed at that LSN. After a promotion it stays where replay ended.
func (s *Standby) ReplayLSN(ctx context.Context) (LSN, error) {
	var v *string
	if err := s.query(ctx, func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT pg_last_wal_replay_lsn()::text`).Scan(&v)
	}); err != nil {
		return 0, fmt.Errorf("standby on port %d: replay position: %w", s.port, err)
	}
	if v == nil {
		return 0, fmt.Errorf("standby on port %d has replayed nothing (not a standby?)", s.port)
	}
	return ParseLSN(*v)
}

// WaitReplayed waits until the standby has replayed the WAL up to lsn,
// e.g. the primary's CurrentLSN after a write, so a read on the standby
// sees that write.
func (s *Standby) WaitReplayed(ctx context.Context, lsn LSN) error {
	var last LSN
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, s.timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		last, err = s.ReplayLSN(ctx)
		return err == nil && last >= lsn, nil
	})
	if err != nil {
		return fmt.Errorf("standby on port %d replayed up to %s, not %s: %w", s.port, last, lsn, err)
	}
	return nil
}

// CatchUp waits until the standby has replayed everything the primary has
// written so far.
func (s *Standby) CatchUp(ctx context.Context) error {
	lsn, err := s.Primary.CurrentLSN(ctx)
	if err != nil {
		return err
	}
	return s.WaitReplayed(ctx, lsn)
}

// CurrentLSN is the primary's current WAL insert position
// (pg_current_wal_insert_lsn): it covers every commit made so far. The
// write position (pg_current_wal_lsn) does not: the test servers run with
// synchronous_commit=off, so a commit can return before its record is
// written, and a standby replayed up to the write position could still
// miss it (TestStandby saw it under load). It fails on a standby.
func (i *Instance) CurrentLSN(ctx context.Context) (LSN, error) {
	var v string
	if err := i.query(ctx, func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&v)
	}); err != nil {
		return 0, fmt.Errorf("postgres on port %d: current WAL position: %w", i.port, err)
	}
	return ParseLSN(v)
}

// LSN is a PostgreSQL WAL position (pg_lsn), comparable as a number.
type LSN uint64

// ParseLSN parses the text form of a pg_lsn, "16/B374D848".
func ParseLSN(s string) (LSN, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("LSN %q: want XXX/XXX", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("LSN %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("LSN %q: %w", s, err)
	}
	return LSN(h<<32 | l), nil
}

func (l LSN) String() string { return fmt.Sprintf("%X/%X", uint64(l)>>32, uint32(l)) }

// Pid is the postmaster's process id.
func (i *Instance) Pid() int { return i.cmd.Process.Pid }

// Port is the TCP port the server listens on at 127.0.0.1.
func (i *Instance) Port() int { return i.port }

// Kill crashes the server the way a machine failure would: it freezes the
// postmaster (SIGSTOP, so it starts nothing new) and each of its child
// processes (backends, WAL sender, checkpointer: all ours, found by their
// parent pid), then SIGKILLs them, so no process sends another byte of WAL
// to a standby or flushes anything. The data dir and port are kept:
// Resume restarts it with crash recovery, Stop removes it.
func (i *Instance) Kill() error {
	select {
	case <-i.exited:
		return nil
	default:
	}
	pid := i.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop postgres pid %d: %w", pid, err)
	}
	children := childPids(pid)
	for _, c := range children {
		_ = syscall.Kill(c, syscall.SIGSTOP)
	}
	if err := i.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill postgres pid %d: %w", pid, err)
	}
	for _, c := range children {
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
	select {
	case <-i.exited:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("postgres pid %d did not exit within 30s of SIGKILL", pid)
	}
	// The children are reparented once the postmaster is gone; wait until
	// they are gone too, so a Resume finds its shared memory unused.
	return wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return !slices.ContainsFunc(children, processAlive), nil
	})
}

// childPids lists the processes whose parent is pid (from /proc).
func childPids(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentPid(p); ok && ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

// parentPid reads the parent of pid from /proc/<pid>/stat.
func parentPid(pid int) (int, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	s := string(b)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0, false
	}
	fields := strings.Fields(s[end+1:])
	if len(fields) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(fields[1])
	return ppid, err == nil
}

// processAlive tells whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	end := strings.LastIndexByte(s, ')')
	fields := strings.Fields(s[end+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

// dropSlot removes the standby's replication slot from the primary, if
// the primary runs, so it stops keeping WAL for it. The slot stays active
// for a moment after the standby stopped, until the WAL sender notices.
func (i *Instance) dropSlot(name string) {
	select {
	case <-i.exited:
		return
	default:
	}
	_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		var exists bool
		err := i.query(ctx, func(conn *pgx.Conn) error {
			if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`, name); err != nil {
				return err
			}
			return conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_replication_slots WHERE slot_name = $1)`, name).Scan(&exists)
		})
		return err != nil || !exists, nil
	})
}

// query runs fn on a fresh connection to the instance's postgres database.
func (i *Instance) query(ctx context.Context, fn func(*pgx.Conn) error) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, i.DSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return fn(conn)
}

// CreateDatabase creates an empty database on the instance (on a primary;
// its standbys get it by replication).
func (i *Instance) CreateDatabase(ctx context.Context, name string) error {
	return i.query(ctx, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
		return err
	})
}

// DatabaseDSN is DSN for another database of the instance.
func (i *Instance) DatabaseDSN(name string) string {
	dsn, _ := WithDatabase(i.DSN(), name) // DSN is a URL: cannot fail
	return dsn
}

// WithDatabase points a URL or keyword/value DSN at another database.
func WithDatabase(dsn, db string) (string, error) { return withDatabase(dsn, db) }

// MultiHostDSN is a keyword/value DSN listing the instances in order, as
// libpq and pgx accept it: host=127.0.0.1,127.0.0.1 port=A,B plus
// target_session_attrs (e.g. read-write, prefer-standby; "" leaves it
// out), for database db ("" is postgres) as the postgres user without TLS.
func MultiHostDSN(db, targetSessionAttrs string, insts ...*Instance) string {
	hosts := make([]string, len(insts))
	ports := make([]string, len(insts))
	for n, inst := range insts {
		hosts[n], ports[n] = "127.0.0.1", strconv.Itoa(inst.port)
	}
	if db == "" {
		db = "postgres"
	}
	dsn := fmt.Sprintf("host=%s port=%s user=postgres dbname=%s sslmode=disable",
		strings.Join(hosts, ","), strings.Join(ports, ","), quoteValue(db))
	if targetSessionAttrs != "" {
		dsn += " target_session_attrs=" + targetSessionAttrs
	}
	return dsn
}

// quoteValue quotes a keyword/value connection string value.
func quoteValue(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// urlDSN is a libpq URL for database db on the instance with the given
// query parameters.
func (i *Instance) urlDSN(db string, query url.Values) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(i.port)),
		Path:     "/" + db,
		RawQuery: query.Encode(),
	}
	return u.String()
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func deref(s *string) string {
	if s == nil {
		return "none"
	}
	return *s
}

// Stop stops the standby (see Instance.Stop) and drops its replication
// slot on the primary if the primary still runs, so the primary stops
// keeping WAL for it.
func (s *Standby) Stop() error {
	err := s.Instance.Stop()
	s.Primary.dropSlot(s.Name)
	return err
}
