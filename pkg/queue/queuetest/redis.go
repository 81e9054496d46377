// Package queuetest starts private redis-server processes for tests: each
// test gets its own server on a free loopback port with its own directory,
// which it can kill and restart to test crashes.
package queuetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/redis/go-redis/v9"

	"github.com/sundialhq/sundial/internal/freeport"
)

// Server is a redis-server process owned by one test.
type Server struct {
	t    testing.TB
	dir  string
	port int
	args []string // extra redis-server arguments
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start launches a redis-server with AOF persistence (appendfsync everysec)
// for t and stops it when t ends. Without redis-server on PATH the test is
// skipped, except under CI=true where that is a failure.
func Start(t testing.TB) *Server { t.Helper(); return StartWith(t) }

// StartWith is Start with extra redis-server arguments, e.g.
// "--appendfsync", "always" for a server whose acknowledged writes survive
// kill -9.
func StartWith(t testing.TB, args ...string) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server not found on PATH")
		}
		t.Skip("redis-server not found on PATH; install redis-server to run this test")
	}
	s := &Server{t: t, dir: t.TempDir()}
	t.Cleanup(s.Kill)
	StartOnFreePorts(t, func() (string, error) {
		s.port = FreePort(t)
		s.args = make([]string, len(args))
		for i, a := range args {
			if a == FreePortArg {
				a = strconv.Itoa(FreePort(t))
			}
			s.args[i] = a
		}
		_ = os.Remove(filepath.Join(s.dir, "redis.log"))
		return s.launch()
	})
	return s
}

// StartOnFreePorts calls start, which chooses its ports afresh on each
// call, until it succeeds. A port found free can be taken by another
// process before the server binds it (the tests of other packages run at
// the same time), so a start whose log says "Address already in use" is
// tried again, up to 5 times in all; any other failure fails t with the
// log.
func StartOnFreePorts(t testing.TB, start func() (log string, err error)) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		log, err := start()
		if err == nil {
			return
		}
		if !strings.Contains(log, "Address already in use") || attempt == 5 {
			t.Fatalf("%v: %s", err, log)
		}
	}
}

// ErrExited: the server process ended before it answered PING.
var ErrExited = errors.New("exited at start")

// AwaitPing waits until the server on addr answers PING. It returns
// ErrExited as soon as exited is closed (the process ended), and an error
// when 15 s pass without an answer.
func AwaitPing(addr string, exited <-chan struct{}) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return ErrExited
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready: %w", addr, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// FreePortArg, as an argument to StartWith, stands for a free port of its
// own (e.g. a cluster bus port), chosen again when a start loses its ports.
const FreePortArg = "{free-port}"

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Dir is the server's directory, which holds its append-only files.
func (s *Server) Dir() string { return s.dir }

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Client returns a go-redis client for the server, closed when the test ends.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	s.t.Cleanup(func() { c.Close() })
	return c
}

func (s *Server) start() {
	s.t.Helper()
	if log, err := s.launch(); err != nil {
		s.t.Fatalf("%v: %s", err, log)
	}
}

// launch starts the process and waits until it answers PING. When it does
// not, it returns why, with the server's log if it exited.
func (s *Server) launch() (log string, err error) {
	s.t.Helper()
	cmd := exec.Command("redis-server",
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--dir", s.dir, "--appendonly", "yes", "--appendfsync", "everysec",
		"--save", "", "--daemonize", "no", "--loglevel", "warning",
		"--logfile", filepath.Join(s.dir, "redis.log"))
	cmd.Args = append(cmd.Args, s.args...)
	// Pdeathsig: a test binary killed by its timeout takes the server along.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	err = AwaitPing(s.Addr(), done)
	if errors.Is(err, ErrExited) {
		b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
		s.mu.Lock()
		s.cmd = nil
		s.mu.Unlock()
		return string(b), fmt.Errorf("redis-server %w", err)
	}
	return "", err
}

// Kill stops the server with SIGKILL (as a crash would) and waits for it.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Pause freezes the server with SIGSTOP, as a stop-the-world pause or a
// VM migration would: its connections stay open and nothing answers,
// until Resume. Kill and the test's cleanup end a paused server too.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume lets a paused server run again (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// Alive reports whether the server process runs (it was not killed).
func (s *Server) Alive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Restart kills the server and starts it again on the same port and
// directory; it comes back with what its append-only file held.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.start()
}

// FreePort returns a free loopback TCP port (freeport.Port).
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := freeport.Port()
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	return p
}

// Eventually polls cond every few milliseconds until it returns true or
// timeout passes, then fails the test with msg.
func Eventually(t testing.TB, timeout time.Duration, msg string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v: %s", timeout, msg)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Name returns a name unique within the test binary, for queues.
func Name(prefix string) string {
	nameMu.Lock()
	defer nameMu.Unlock()
	nameSeq++
	return fmt.Sprintf("%s-%d", prefix, nameSeq)
}

var (
	nameMu  sync.Mutex
	nameSeq int
)

// IgnorePoolRedial is the goleak option for go-redis' background redial:
// once a dial fails, the client's pool retries every second until the
// client is closed, so a client closed just after its server died (or was
// killed by the test) leaves that goroutine for up to a second.
var IgnorePoolRedial = goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")
