package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// bullSys drives BullMQ through node/bullmq.js, one child process per
// redis-server: the tool writes one JSON command a line on its stdin and
// reads one JSON answer a line from its stdout, so every INFO around a
// command is read while the script waits.
type bullSys struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

type bullReply struct {
	OK      bool    `json:"ok"`
	Error   string  `json:"error"`
	Count   int     `json:"count"`
	Seconds float64 `json:"seconds"`
	Version string  `json:"version"`
}

func newBull(script string) func(addr string) (system, error) {
	return func(addr string) (system, error) {
		cmd := exec.Command("node", script, addr, queueName)
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the tool
		in, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		b := &bullSys{cmd: cmd, in: in, out: bufio.NewScanner(out)}
		if _, err := b.call(map[string]any{"op": "ready"}); err != nil {
			b.Close()
			return nil, err
		}
		return b, nil
	}
}

func (b *bullSys) call(c map[string]any) (bullReply, error) {
	line, _ := json.Marshal(c)
	if _, err := b.in.Write(append(line, '\n')); err != nil {
		return bullReply{}, err
	}
	if !b.out.Scan() {
		return bullReply{}, fmt.Errorf("bullmq.js ended: %v", b.out.Err())
	}
	var r bullReply
	if err := json.Unmarshal(b.out.Bytes(), &r); err != nil {
		return r, fmt.Errorf("bullmq.js: %q: %w", b.out.Text(), err)
	}
	if !r.OK {
		return r, fmt.Errorf("bullmq.js: %s", r.Error)
	}
	return r, nil
}

func (b *bullSys) Fill(_ context.Context, state string, n int) (int, error) {
	r, err := b.call(map[string]any{"op": "fill", "state": state, "n": n})
	return r.Count, err
}

func (b *bullSys) Submit(_ context.Context, n int) (time.Duration, error) {
	r, err := b.call(map[string]any{"op": "submit", "n": n})
	return time.Duration(r.Seconds * float64(time.Second)), err
}

func (b *bullSys) version() string {
	r, err := b.call(map[string]any{"op": "version"})
	if err != nil {
		return "unknown"
	}
	return r.Version
}

func (b *bullSys) Close() error {
	_, _ = b.call(map[string]any{"op": "close"})
	b.in.Close()
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill() // the child this tool started
		return <-done
	}
}
