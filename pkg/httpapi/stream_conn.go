package httpapi

import (
	"bufio"
	"net"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// maxCork bounds the bytes a corked connection holds before it writes.
const maxCork = 64 << 10

// corkConn is a hijacked websocket connection that can hold writes back
// ("cork") while the stream writes a run of queued messages, then send
// them with one system call. The websocket library flushes every message;
// without corking a client fed 200 events a second costs 200 writes.
// Every write to the socket carries a deadline (timeout), so a client that
// stops reading can hold a writer no longer than that.
type corkConn struct {
	net.Conn
	timeout time.Duration
	mu      sync.Mutex
	corked  bool
	buf     []byte
}

// write sends p to the socket under the write deadline.
func (c *corkConn) write(p []byte) (int, error) {
	if c.timeout > 0 {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(p)
}

// Write sends p, or keeps it while the connection is corked.
func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked && len(c.buf)+len(p) <= maxCork {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	return c.write(p)
}

// cork holds writes back until uncork.
func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork sends what was held back.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	return c.flushLocked()
}

func (c *corkConn) flushLocked() error {
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.write(c.buf)
	c.buf = c.buf[:0]
	return err
}

// corkingWriter hands the websocket handshake a connection that corks:
// its Hijack wraps the hijacked connection in a corkConn.
type corkingWriter struct {
	gin.ResponseWriter
	timeout time.Duration // the corkConn's write deadline
	conn    *corkConn
}

// Hijack takes over the connection, writing through a corkConn.
func (w *corkingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := w.ResponseWriter.Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Flush(); err != nil {
		return nil, nil, err
	}
	w.conn = &corkConn{Conn: nc, timeout: w.timeout}
	return w.conn, bufio.NewReadWriter(brw.Reader, bufio.NewWriterSize(w.conn, 4096)), nil
}
