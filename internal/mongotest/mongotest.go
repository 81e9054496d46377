// Package mongotest gives tests a MongoDB: FerretDB v1 (tools/ferretdb) on a private
// PostgreSQL cluster, both started as child processes on free 127.0.0.1 ports in a temporary
// directory (PostgresURL gives tests a database of that cluster of their own). These machines
// have no MongoDB server package and no Docker engine; see
// docs/mongo-standin.md for what FerretDB v1 does not support.
//
// PostgreSQL and one shared FerretDB start lazily, once per test binary, the first time a test
// asks for them, and stop when the tests end. The package's TestMain must hand over to this
// package so that happens:
//
//	func TestMain(m *testing.M) { mongotest.Main(m) }
//
// (or `code := mongotest.Run(m); …; os.Exit(code)`). Each test gets its own database name.
// A test that needs to take "MongoDB" down and bring it back uses NewServer: its own FerretDB
// process over the same PostgreSQL, which Stop and Start control.
//
// The FerretDB binary is built from tools/ferretdb on first use (several minutes) into
// <repo>/.local/bin/ferretdb-<hash of its sources> (or the user cache directory if the repo is
// read-only) and reused afterwards; scripts/mongo-standin.sh shares that cache. Environment:
//
//	SUNDIAL_FERRETDB_BIN  use this FerretDB binary instead of building one
//	SUNDIAL_PG_BIN        directory holding initdb and postgres
//	CI=true               missing PostgreSQL fails the test instead of skipping it
//
// Running as root, initdb and postgres run as the "postgres" user (they refuse root).
package mongotest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/sundialhq/sundial/internal/freeport"
)

// readyTimeout bounds every wait for a server to come up or go down.
const readyTimeout = 60 * time.Second

// errNoPostgres marks a machine without PostgreSQL: tests skip, except under CI=true.
var errNoPostgres = errors.New("mongotest: PostgreSQL not found")

var (
	runCalled atomic.Bool
	dbSeq     atomic.Int64

	mu       sync.Mutex
	started  bool
	startErr error
	env      *environment
	shared   *ferret
	servers  = map[*Server]struct{}{}
)

// environment is what one test binary starts once: a temporary directory, a PostgreSQL
// cluster in it and the path of the FerretDB binary.
type environment struct {
	dir     string
	pgBin   string
	cred    *syscall.Credential // non-nil when running as root: run PostgreSQL as this user
	pg      *proc
	pgURL   string
	ferret  string // FerretDB binary
	logSeq  int
	stopped bool
}

// Main runs the tests, stops what this package started and exits with the tests' status.
// Call it from the TestMain of every package that uses mongotest.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run runs the tests, stops what this package started and returns m.Run's status, for a
// TestMain that has more to do before it exits.
func Run(m *testing.M) int {
	runCalled.Store(true)
	code := m.Run()
	shutdown()
	return code
}

// Start returns the URI of the shared FerretDB and a database name of t's own (unique within
// the test binary), starting PostgreSQL and FerretDB if this is the first call.
func Start(t testing.TB) (uri, dbName string) {
	t.Helper()
	f := sharedServer(t)
	return f.uri(), DBName(t)
}

// Client connects to the shared FerretDB and returns the client and t's own database. The
// client disconnects when t ends.
func Client(t testing.TB) (*mongo.Client, *mongo.Database) {
	t.Helper()
	uri, db := Start(t)
	c := connect(t, uri)
	return c, c.Database(db)
}

// DBName returns a database name made from t's name, unique within the test binary and
// valid for FerretDB (lower case letters, digits and underscores, at most 63 bytes).
func DBName(t testing.TB) string {
	var b strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		if b.Len() >= 40 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return fmt.Sprintf("t_%s_%d", b.String(), dbSeq.Add(1))
}

// PostgresURL returns the URL of a new, empty PostgreSQL database of t's own on the shared
// cluster (started on first use, as Start does), for tests of code that uses PostgreSQL itself
// (sundialpg). The database stays until the cluster stops at the end of the test binary.
func PostgresURL(t testing.TB) string {
	t.Helper()
	e := environmentFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.pgURL)
	if err != nil {
		t.Fatalf("mongotest: %v", err)
	}
	defer conn.Close(ctx)
	name := DBName(t)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("mongotest: create database %s: %v", name, err)
	}
	return strings.TrimSuffix(e.pgURL, "/postgres") + "/" + name
}

// Server is a FerretDB process of one test's own, over the shared PostgreSQL, so the test can
// stop it ("MongoDB is down") and start it again on the same port with the same data. Its
// methods must be called from the test's goroutine (they call t.Fatal).
type Server struct {
	t testing.TB
	f *ferret
}

// NewServer starts a FerretDB for t alone; it stops when t ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	e := environmentFor(t)
	mu.Lock()
	f, err := startFerret(e, 0)
	s := &Server{t: t, f: f}
	if err == nil {
		servers[s] = struct{}{}
	}
	mu.Unlock()
	if err != nil {
		t.Fatalf("mongotest: %v", err)
	}
	t.Cleanup(func() {
		mu.Lock()
		delete(servers, s)
		mu.Unlock()
		// FerretDB keeps no state of its own (it is all in PostgreSQL), and a graceful stop
		// gives open connections 3 s.
		if err := s.f.stop(syscall.SIGKILL); err != nil {
			t.Errorf("mongotest: %v", err)
		}
	})
	return s
}

// URI returns the server's MongoDB URI; it stays the same across Stop and Start.
func (s *Server) URI() string { return s.f.uri() }

// Addr returns the server's host:port.
func (s *Server) Addr() string { return s.f.addr() }

// Client connects to the server and returns the client and a database of t's own. The client
// disconnects when t ends; while the server is stopped its operations fail.
func (s *Server) Client(t testing.TB) (*mongo.Client, *mongo.Database) {
	t.Helper()
	c := connect(t, s.URI())
	return c, c.Database(DBName(t))
}

// Stop stops the FerretDB process gracefully (SIGTERM) and waits until it has exited and the
// port is closed. Data stays in PostgreSQL. FerretDB gives open client connections 3 s to
// finish, so Stop takes that long while a client is connected; Kill is immediate.
func (s *Server) Stop() {
	s.t.Helper()
	if err := s.f.stop(syscall.SIGTERM); err != nil {
		s.t.Fatalf("mongotest: %v", err)
	}
}

// Kill stops the FerretDB process abruptly (SIGKILL), as a crash would.
func (s *Server) Kill() {
	s.t.Helper()
	if err := s.f.stop(syscall.SIGKILL); err != nil {
		s.t.Fatalf("mongotest: %v", err)
	}
}

// Start starts the FerretDB process again on the same port and waits until it answers ping.
// It does nothing if the server is running.
func (s *Server) Start() {
	s.t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if s.f.running() {
		return
	}
	if env == nil || env.stopped {
		s.t.Fatalf("mongotest: Server.Start after the test binary's servers were shut down")
	}
	f, err := startFerret(env, s.f.port)
	if err != nil {
		s.t.Fatalf("mongotest: %v", err)
	}
	s.f = f
}

// connect returns a client for uri that disconnects when t ends.
func connect(t testing.TB, uri string) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatalf("mongotest: connect %s: %v", uri, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Disconnect(ctx)
	})
	return c
}

// sharedServer returns the shared FerretDB, starting everything on first use.
func sharedServer(t testing.TB) *ferret {
	t.Helper()
	environmentFor(t)
	return shared
}

// environmentFor starts PostgreSQL and the shared FerretDB once per test binary, or reports
// (skip or fail) why they could not start.
func environmentFor(t testing.TB) *environment {
	t.Helper()
	if !runCalled.Load() {
		t.Fatal("mongotest: the package's TestMain must call mongotest.Main(m) (or mongotest.Run(m)) so the servers stop at the end")
	}
	mu.Lock()
	if !started {
		started = true
		env, shared, startErr = startEnvironment()
	}
	e, err := env, startErr
	if err == nil && e.stopped {
		err = errors.New("mongotest: used after the test binary's servers were shut down")
	}
	mu.Unlock()
	if err != nil {
		if errors.Is(err, errNoPostgres) && os.Getenv("CI") != "true" {
			t.Skipf("%v (install postgresql, or set SUNDIAL_PG_BIN; with CI=true this fails)", err)
		}
		t.Fatal(err)
	}
	return e
}

func startEnvironment() (e *environment, f *ferret, err error) {
	pgBin, err := findPostgres()
	if err != nil {
		return nil, nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, nil, fmt.Errorf("%w: running as root needs the 'postgres' user to run PostgreSQL as (%v)", errNoPostgres, err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	bin, err := ferretdbBinary()
	if err != nil {
		return nil, nil, err
	}

	removeStaleDirs()
	dir, err := os.MkdirTemp("", fmt.Sprintf("sundial-mongotest-%d-", os.Getpid()))
	if err != nil {
		return nil, nil, err
	}
	e = &environment{dir: dir, pgBin: pgBin, cred: cred, ferret: bin}
	defer func() {
		if err != nil {
			e.shutdown()
		}
	}()
	if cred != nil {
		// PostgreSQL's user must own its data directory; /tmp lets it reach this one.
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, nil, err
		}
	}
	if err := e.initdb(); err != nil {
		return nil, nil, err
	}
	if err := e.startPostgres(); err != nil {
		return nil, nil, err
	}
	f, err = startFerret(e, 0)
	if err != nil {
		return nil, nil, err
	}
	return e, f, nil
}

// shutdown stops every server this package started (FerretDB first) and removes the
// temporary directory.
func shutdown() {
	mu.Lock()
	defer mu.Unlock()
	for s := range servers {
		_ = s.f.stop(syscall.SIGKILL)
		delete(servers, s)
	}
	if shared != nil {
		_ = shared.stop(syscall.SIGKILL) // stateless, see NewServer
	}
	if env != nil {
		env.shutdown()
	}
}

func (e *environment) shutdown() {
	if e.pg != nil {
		// SIGINT is PostgreSQL's fast shutdown.
		if err := e.pg.stop(syscall.SIGINT); err != nil {
			fmt.Fprintf(os.Stderr, "mongotest: %v\n", err)
		}
	}
	_ = os.RemoveAll(e.dir)
	e.stopped = true
}

func (e *environment) logFile(name string) (*os.File, string, error) {
	e.logSeq++
	p := filepath.Join(e.dir, fmt.Sprintf("%s-%d.log", name, e.logSeq))
	f, err := os.Create(p)
	return f, p, err
}

// command runs PostgreSQL's tools as the non-root user when needed, and makes the child die
// with this process (on a crash or timeout, when Run's shutdown does not get to run).
func (e *environment) command(sig syscall.Signal, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: sig}
	if e.cred != nil && strings.HasPrefix(name, e.pgBin) {
		cmd.SysProcAttr.Credential = e.cred
		cmd.Env = append(os.Environ(), "HOME="+e.dir)
	}
	cmd.Dir = e.dir
	return cmd
}

func (e *environment) initdb() error {
	cmd := e.command(syscall.SIGKILL, filepath.Join(e.pgBin, "initdb"),
		"-D", filepath.Join(e.dir, "pg"), "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--no-locale", "--no-sync")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("mongotest: initdb: %v\n%s", err, out)
	}
	return nil
}

func (e *environment) startPostgres() error {
	data := filepath.Join(e.dir, "pg")
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // another process may take the free port first
		port, err := freeport.Port()
		if err != nil {
			return err
		}
		log, logPath, err := e.logFile("postgresql")
		if err != nil {
			return err
		}
		cmd := e.command(syscall.SIGINT, filepath.Join(e.pgBin, "postgres"),
			"-D", data, "-p", strconv.Itoa(port),
			"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
			"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
			"-c", "max_connections=300", "-c", "shared_buffers=32MB")
		cmd.Stdout, cmd.Stderr = log, log
		p, err := startProc(cmd, "postgresql", logPath)
		log.Close()
		if err != nil {
			return err
		}
		// Ready when its pid file says so, as pg_ctl -w checks.
		err = waitFor(readyTimeout, p, func() bool {
			b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
			if err != nil {
				return false
			}
			lines := strings.Split(string(b), "\n")
			return len(lines) > 7 && strings.TrimSpace(lines[0]) == strconv.Itoa(p.cmd.Process.Pid) &&
				strings.TrimSpace(lines[7]) == "ready"
		})
		if err == nil {
			e.pg = p
			e.pgURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres", port)
			return nil
		}
		_ = p.stop(syscall.SIGKILL)
		lastErr = err
	}
	return lastErr
}

// ferret is one FerretDB process.
type ferret struct {
	port int
	p    *proc
}

func (f *ferret) addr() string  { return net.JoinHostPort("127.0.0.1", strconv.Itoa(f.port)) }
func (f *ferret) uri() string   { return "mongodb://" + f.addr() + "/" }
func (f *ferret) running() bool { return f.p.running() }
func (f *ferret) stop(sig syscall.Signal) error {
	if err := f.p.stop(sig); err != nil {
		return err
	}
	// The listener goes with the process; make sure nothing answers before returning.
	deadline := time.Now().Add(readyTimeout)
	for {
		c, err := net.DialTimeout("tcp", f.addr(), time.Second)
		if err != nil {
			return nil
		}
		c.Close()
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still accepts connections after FerretDB exited", f.addr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startFerret starts FerretDB on port (a free one if 0) and waits until it answers ping.
// Callers hold mu.
func startFerret(e *environment, port int) (*ferret, error) {
	fixed := port != 0
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		if !fixed {
			var err error
			if port, err = freeport.Port(); err != nil {
				return nil, err
			}
		}
		log, logPath, err := e.logFile(fmt.Sprintf("ferretdb-%d", port))
		if err != nil {
			return nil, err
		}
		f := &ferret{port: port}
		cmd := e.command(syscall.SIGTERM, e.ferret, "-listen", f.addr(), "-postgresql-url", e.pgURL, "-log-level", "warn")
		cmd.Stdout, cmd.Stderr = log, log
		f.p, err = startProc(cmd, "ferretdb", logPath)
		log.Close()
		if err != nil {
			return nil, err
		}
		if err = waitPing(f); err == nil {
			return f, nil
		}
		_ = f.p.stop(syscall.SIGKILL)
		lastErr = err
		if fixed {
			break
		}
	}
	return nil, lastErr
}

// waitPing waits until the port accepts connections, then until a ping succeeds.
func waitPing(f *ferret) error {
	err := waitFor(readyTimeout, f.p, func() bool {
		c, err := net.DialTimeout("tcp", f.addr(), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	c, err := mongo.Connect(options.Client().ApplyURI(f.uri()).SetServerSelectionTimeout(2 * time.Second))
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Disconnect(ctx)
	}()
	var pingErr error
	err = waitFor(readyTimeout, f.p, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		pingErr = c.Ping(ctx, readpref.Primary())
		return pingErr == nil
	})
	if err != nil && pingErr != nil {
		return fmt.Errorf("%w (last ping: %v)", err, pingErr)
	}
	return err
}

// proc is a child process and the result of waiting for it.
type proc struct {
	name, log string
	cmd       *exec.Cmd
	done      chan struct{}
	err       error
}

func startProc(cmd *exec.Cmd, name, logPath string) (*proc, error) {
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("mongotest: start %s: %w", name, err)
	}
	p := &proc{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop signals the process (only this one, by its pid) and waits for it to exit, killing it
// if it has not within readyTimeout.
func (p *proc) stop(sig syscall.Signal) error {
	if !p.running() {
		return nil
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return nil
	case <-time.After(readyTimeout):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	return fmt.Errorf("%s (pid %d) ignored %v for %v and was killed", p.name, p.cmd.Process.Pid, sig, readyTimeout)
}

// waitFor polls cond until it holds, p exits or the timeout passes.
func waitFor(timeout time.Duration, p *proc, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return nil
		}
		if !p.running() {
			return fmt.Errorf("mongotest: %s exited (%v) before it was ready:\n%s", p.name, p.err, tail(p.log))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mongotest: %s not ready after %v:\n%s", p.name, timeout, tail(p.log))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// removeStaleDirs removes the temporary directories of test binaries that died without
// shutting down (killed, or timed out).
func removeStaleDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "sundial-mongotest-*-*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(filepath.Base(d), "sundial-mongotest-"), "-", 2)[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
}

func findPostgres() (string, error) {
	has := func(dir string) bool {
		for _, n := range []string{"initdb", "postgres"} {
			if st, err := os.Stat(filepath.Join(dir, n)); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	if d := os.Getenv("SUNDIAL_PG_BIN"); d != "" {
		if has(d) {
			return d, nil
		}
		return "", fmt.Errorf("%w: SUNDIAL_PG_BIN=%s has no initdb and postgres", errNoPostgres, d)
	}
	if p, err := exec.LookPath("postgres"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	// Debian keeps the server binaries out of PATH; prefer the newest major version.
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w (no initdb and postgres in PATH or /usr/lib/postgresql/*/bin)", errNoPostgres)
}

// ferretdbBinary returns a FerretDB binary built from the repo's tools/ferretdb, building it
// if the cache has none for the current sources.
func ferretdbBinary() (string, error) {
	if p := os.Getenv("SUNDIAL_FERRETDB_BIN"); p != "" {
		return p, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	src := filepath.Join(root, "tools", "ferretdb")
	key, err := sourceKey(src)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, ".local", "bin")
	if !writableDir(dir) {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("mongotest: %s is not writable and there is no user cache directory: %v", dir, err)
		}
		dir = filepath.Join(cache, "sundial", "ferretdb")
		if !writableDir(dir) {
			return "", fmt.Errorf("mongotest: cannot write the FerretDB binary cache %s", dir)
		}
	}
	bin := filepath.Join(dir, "ferretdb-"+key)
	if isExecutable(bin) {
		return bin, nil
	}

	// One build at a time across test binaries (and scripts/mongo-standin.sh).
	lock, err := os.OpenFile(filepath.Join(dir, ".ferretdb-build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing unlocks anyway
	if isExecutable(bin) {
		return bin, nil
	}

	goCmd, err := exec.LookPath("go")
	if err != nil {
		if gr := os.Getenv("GOROOT"); gr != "" {
			goCmd = filepath.Join(gr, "bin", "go")
		} else {
			return "", fmt.Errorf("mongotest: no go command to build FerretDB with (or set SUNDIAL_FERRETDB_BIN): %v", err)
		}
	}
	fmt.Fprintf(os.Stderr, "mongotest: building FerretDB from %s into %s (the first build takes several minutes)\n", src, bin)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	tmp := fmt.Sprintf("%s.tmp.%d", bin, os.Getpid())
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-tags", "ferretdb_no_sqlite", "-o", tmp, ".")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("mongotest: building FerretDB: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "mongotest: built FerretDB in %v\n", time.Since(start).Round(time.Second))
	// Drop binaries built from older sources.
	old, _ := filepath.Glob(filepath.Join(dir, "ferretdb-*"))
	for _, o := range old {
		if o != bin && !strings.Contains(filepath.Base(o), ".") {
			_ = os.Remove(o)
		}
	}
	return bin, nil
}

// sourceKey hashes tools/ferretdb's go.mod, go.sum and *.go files (in byte order), like
// scripts/mongo-standin.sh does.
func sourceKey(src string) (string, error) {
	goFiles, err := filepath.Glob(filepath.Join(src, "*.go"))
	if err != nil {
		return "", err
	}
	sort.Strings(goFiles)
	h := sha256.New()
	for _, p := range append([]string{filepath.Join(src, "go.mod"), filepath.Join(src, "go.sum")}, goFiles...) {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", fmt.Errorf("mongotest: %v", err)
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// repoRoot walks up from the working directory (a package directory under go test) to the
// directory holding tools/ferretdb, falling back to `go env GOMOD`.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "tools", "ferretdb", "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if gomod := string(bytes.TrimSpace(out)); err == nil && gomod != "" && gomod != os.DevNull {
		d := filepath.Dir(gomod)
		if _, err := os.Stat(filepath.Join(d, "tools", "ferretdb", "go.mod")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("mongotest: cannot find the repository root (a directory with tools/ferretdb/go.mod) above %s; set SUNDIAL_FERRETDB_BIN", wd)
}

func writableDir(dir string) bool {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return false
	}
	f.Close()
	os.Remove(f.Name())
	return true
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}
