package freeport

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// A port from Port can be listened on, and lies below the ephemeral range
// (where outgoing connections take theirs).
func TestPortIsFreeAndBelowTheEphemeralRange(t *testing.T) {
	reservations = t.TempDir()
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

// Callers drawing at once (as test binaries side by side do) never get the
// same port while its record holds: 400 draws from 10,000 ports would
// repeat one about eight times by chance alone.
func TestPortsAreNotHandedOutTwice(t *testing.T) {
	reservations = t.TempDir()
	var mu sync.Mutex
	seen := map[int]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				p, err := Port()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[p] {
					t.Errorf("port %d handed out twice", p)
				}
				seen[p] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// A record keeps a port for holdFor; a stale one is taken over, once.
func TestReservationsExpire(t *testing.T) {
	reservations = t.TempDir()
	const p = 23456
	if !reserve(p) {
		t.Fatal("a port nobody reserved was refused")
	}
	if reserve(p) {
		t.Fatal("a port reserved just now was handed out again")
	}
	path := filepath.Join(reservations, strconv.Itoa(p))
	old := time.Now().Add(-holdFor - time.Second)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if !reserve(p) {
		t.Fatal("a stale reservation was not taken over")
	}
	if reserve(p) {
		t.Fatal("a reservation taken over just now was handed out again")
	}
	if entries, _ := os.ReadDir(reservations); len(entries) != 1 {
		t.Fatalf("the directory holds %d entries, want the one record", len(entries))
	}
}
