package queuetest

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// StartMain starts a redis-server for a package's TestMain, where no
// testing.T exists yet (Example functions get none): the server and its
// directory go away when stop is called. Unlike Start it never skips:
// without redis-server on PATH it returns an error naming what to install,
// which TestMain should report and exit non-zero on.
func StartMain() (s *Server, stop func(), err error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, nil, fmt.Errorf("redis-server not found on PATH: install it (apt-get install redis-server, or scripts/install-deps.sh)")
	}
	tb := &mainTB{}
	stop = func() {
		for i := len(tb.cleanups) - 1; i >= 0; i-- {
			tb.cleanups[i]()
		}
		for _, d := range tb.dirs {
			os.RemoveAll(d)
		}
	}
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(mainFailure)
			if !ok {
				panic(r)
			}
			stop()
			s, stop, err = nil, nil, f
		}
	}()
	return StartWith(tb), stop, nil
}

// mainTB is the part of testing.TB that Start uses, outside any test: a
// failure panics with mainFailure, which StartMain turns into its error.
type mainTB struct {
	testing.TB // nil: a method not overridden here must not be called
	cleanups   []func()
	dirs       []string
}

type mainFailure string

func (f mainFailure) Error() string { return string(f) }

func (*mainTB) Helper()                        {}
func (t *mainTB) Cleanup(f func())             { t.cleanups = append(t.cleanups, f) }
func (*mainTB) Fatal(args ...any)              { panic(mainFailure(fmt.Sprint(args...))) }
func (*mainTB) Fatalf(format string, a ...any) { panic(mainFailure(fmt.Sprintf(format, a...))) }
func (*mainTB) Skip(args ...any)               { panic(mainFailure(fmt.Sprint(args...))) }
func (t *mainTB) TempDir() string {
	d, err := os.MkdirTemp("", "queuetest-")
	if err != nil {
		panic(mainFailure(err.Error()))
	}
	t.dirs = append(t.dirs, d)
	return d
}
