package httpapi

import (
	"bytes"
	"net"
	"testing"
)

// countingConn records each Write.
type countingConn struct {
	net.Conn
	writes [][]byte
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

func TestCorkConn(t *testing.T) {
	t.Parallel()
	under := &countingConn{}
	c := &corkConn{Conn: under}
	c.Write([]byte("a"))
	if len(under.writes) != 1 {
		t.Fatal("an uncorked write was held")
	}
	c.cork()
	c.Write([]byte("b"))
	c.Write([]byte("c"))
	if len(under.writes) != 1 {
		t.Fatal("a corked write went out")
	}
	if err := c.uncork(); err != nil || len(under.writes) != 2 || string(under.writes[1]) != "bc" {
		t.Fatalf("uncork wrote %q", under.writes)
	}
	c.cork()
	c.Write([]byte("d"))
	c.Write(make([]byte, maxCork)) // too big to hold: what is held goes first, then this
	if len(under.writes) != 4 || string(under.writes[2]) != "d" || len(under.writes[3]) != maxCork {
		t.Fatalf("overflow: %d writes", len(under.writes))
	}
	c.uncork()
	if len(under.writes) != 4 {
		t.Fatal("an empty uncork wrote")
	}
}
