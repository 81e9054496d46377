package freeport

import (
	"net"
	"strconv"
	"testing"
)

// A port from Port can be listened on, and lies below the ephemeral range
// (where outgoing connections take theirs).
func TestPortIsFreeAndBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	for range 20 {
		p, err := Port()
		if err != nil {
			t.Fatal(err)
		}
		if low-span >= 1024 && (p < low-span || p >= low) {
			t.Fatalf("port %d outside [%d, %d)", p, low-span, low)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d not free: %v", p, err)
		}
		l.Close()
	}
}
