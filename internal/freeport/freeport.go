// Package freeport finds free loopback TCP ports for the servers that tests
// and the local stack start.
package freeport

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// span is how many ports below the kernel's ephemeral range Port draws from.
const span = 10000

// Port returns a loopback TCP port that is free now. A port is free only
// until someone binds it, and the kernel hands ports of its ephemeral range
// to every outgoing connection, so Port draws at random from the span just
// below that range, where no connection takes one. It falls back to a port
// the kernel picks when that span has none free.
func Port() (int, error) {
	if low := ephemeralLow(); low-span >= 1024 {
		for range 50 {
			p := low - span + rand.IntN(span)
			if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
				l.Close()
				return p, nil
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
