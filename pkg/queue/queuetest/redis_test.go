package queuetest

import (
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// A start whose port was taken before it bound it is tried again on a
// fresh port: here the first try gets a port this test holds, and a real
// redis-server refuses it.
func TestStartOnFreePortsRetriesALostPort(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not found on PATH")
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	tries := 0
	dir := t.TempDir()
	StartOnFreePorts(t, func() (string, error) {
		tries++
		port := FreePort(t)
		if tries == 1 {
			port = taken.Addr().(*net.TCPAddr).Port
		}
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir)
		out := &logTail{}
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
		t0 := time.Now()
		err := AwaitPing("127.0.0.1:"+strconv.Itoa(port), done)
		t.Logf("try %d: %v after %v", tries, err, time.Since(t0))
		if err != nil {
			<-done
			return out.String(), err
		}
		return "", nil
	})
	if tries != 2 {
		t.Fatalf("started after %d tries, want 2", tries)
	}
}

// logTail collects a process's output.
type logTail struct{ b []byte }

func (l *logTail) Write(p []byte) (int, error) { l.b = append(l.b, p...); return len(p), nil }
func (l *logTail) String() string              { return string(l.b) }
