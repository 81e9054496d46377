// Package freeport finds free loopback TCP ports for the servers that tests
// and the local stack start.
package freeport

import (
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// span is how many ports below the kernel's ephemeral range Port draws from.
const span = 10000

// Where Port records the ports it handed out, and for how long a record
// keeps other callers off a port. Tests change them.
var (
	reservations = filepath.Join(os.TempDir(), "sundial-freeport")
	holdFor      = 10 * time.Minute
)

// Port returns a loopback TCP port that is free now. A port is free only
// until someone binds it, and the kernel hands ports of its ephemeral range
// to every outgoing connection, so Port draws at random from the span just
// below that range, where no connection takes one. Between the draw and
// the bind (a server process starting) another caller could draw the same
// port: every process that uses this package (the test binaries go test
// runs side by side, the local stack) records the ports it handed out in a
// shared directory, and skips a port another handed out in the last
// holdFor. It falls back to a port the kernel picks when that span has none
// free.
func Port() (int, error) {
	if low := ephemeralLow(); low-span >= 1024 {
		for range 100 {
			p := low - span + rand.IntN(span)
			if !free(p) || !reserve(p) {
				continue
			}
			return p, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// free tells whether port p can be listened on now.
func free(p int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// reserve records that p is handed out, unless another caller did so less
// than holdFor ago. The record is a file created exclusively; a stale one
// is first renamed away, which only one caller can do, so that two callers
// never both take it over. Where the directory cannot be written nothing is
// recorded and every free port is taken.
func reserve(p int) bool {
	if err := os.MkdirAll(reservations, 0o777); err != nil {
		return true
	}
	path := filepath.Join(reservations, strconv.Itoa(p))
	if st, err := os.Stat(path); err == nil {
		if time.Since(st.ModTime()) < holdFor {
			return false
		}
		stale := path + ".stale." + strconv.Itoa(os.Getpid()) + "." + strconv.FormatUint(rand.Uint64(), 36)
		if os.Rename(path, stale) != nil {
			return false // another caller took it over first
		}
		os.Remove(stale)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
	if err != nil {
		// Only a record made in between keeps the port; a directory this
		// process cannot write to records nothing.
		return !os.IsExist(err)
	}
	f.Close()
	return true
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default when the range cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				return n
			}
		}
	}
	return 32768
}
