// Package proctest runs Sundial's binaries as real processes for tests:
// built once per test binary, started with an environment, killed with
// SIGKILL or stopped with SIGTERM, their output kept for failure reports.
package proctest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// Binary builds the services (api, worker, poller) once per test binary and
// returns the path of the one named.
func Binary(t testing.TB, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "sundial-proctest-bin")
		if buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", binDir+"/",
			"github.com/sundialhq/sundial/services/api",
			"github.com/sundialhq/sundial/services/worker",
			"github.com/sundialhq/sundial/services/poller").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, name)
}

// programs caches Program's builds: import path → binary.
var (
	programsMu sync.Mutex
	programs   = map[string]string{}
)

// Program builds the main package at importPath (a test's own program,
// such as a worker written with the Go library) once per test binary and
// returns the binary's path. Cleanup removes it with the services.
func Program(t testing.TB, importPath string) string {
	t.Helper()
	programsMu.Lock()
	defer programsMu.Unlock()
	if bin, ok := programs[importPath]; ok {
		return bin
	}
	dir, err := os.MkdirTemp("", "sundial-proctest-prog")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(importPath))
	if out, err := exec.Command("go", "build", "-o", bin, importPath).CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		t.Fatalf("go build %s: %v\n%s", importPath, err, out)
	}
	programs[importPath] = bin
	return bin
}

// Cleanup removes the built binaries; call it from TestMain after m.Run.
func Cleanup() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	programsMu.Lock()
	defer programsMu.Unlock()
	for _, bin := range programs {
		os.RemoveAll(filepath.Dir(bin))
	}
}

// Proc is a service process started by a test.
type Proc struct {
	bin  string
	args []string
	env  []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  strings.Builder
}

// Start runs bin with env added to the test's environment. The process is
// killed when the test ends (and when the test binary dies); its output is
// logged if the test failed.
func Start(t testing.TB, bin string, env ...string) *Proc {
	t.Helper()
	return StartCmd(t, []string{bin}, env...)
}

// StartCmd is Start for a command with arguments (argv[0] is looked up on
// PATH), e.g. a worker written in another language.
func StartCmd(t testing.TB, argv []string, env ...string) *Proc {
	t.Helper()
	p := &Proc{bin: argv[0], args: argv[1:], env: env}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(p.bin), p.Output())
		}
	})
	return p
}

func (p *Proc) start() error {
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	w := writerFunc(func(b []byte) (int, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.log.Write(b)
	})
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	return nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// Output returns what the process (every run of it) wrote so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Done is closed when the current run of the process has exited.
func (p *Proc) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// ExitCode returns the exit code of the last run (-1 while it runs or when
// a signal ended it).
func (p *Proc) ExitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.ProcessState.ExitCode()
}

// Kill ends the process with SIGKILL, as a crash would, and waits for it.
func (p *Proc) Kill() { p.Signal(syscall.SIGKILL, 0) }

// Signal sends sig and waits for the process to exit, at most timeout (0:
// without limit). It reports whether the process exited in time.
func (p *Proc) Signal(sig syscall.Signal, timeout time.Duration) bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	select {
	case <-done:
		return true
	default:
	}
	_ = cmd.Process.Signal(sig)
	if timeout <= 0 {
		<-done
		return true
	}
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Pause freezes the process with SIGSTOP, as a stop-the-world pause or a
// VM migration would, until Resume; Kill ends a paused process too.
func (p *Proc) Pause() { p.send(syscall.SIGSTOP) }

// Resume lets a paused process run again (SIGCONT).
func (p *Proc) Resume() { p.send(syscall.SIGCONT) }

func (p *Proc) send(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Restart starts the process again with the same environment; the
// previous run must have exited.
func (p *Proc) Restart(t testing.TB) {
	t.Helper()
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
}
