// Package netfault is a TCP proxy for tests that puts network faults
// between a process and a server: a partition that stalls every
// connection without closing it (the peer sees no error, only silence,
// as behind a dead switch or a dropped route), and a cut that closes
// them, and a lost reply: a command forwarded, the server's answer to it
// dropped and the connection reset, so the client cannot know whether the
// command ran. Tests point a binary or a client at Proxy.Addr instead of the
// server.
package netfault

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections from its loopback address to a target.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	stalled bool
	healed  chan struct{} // closed when a stall ends; replaced by Stall
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup

	// drops are the armed lost replies (DropReply), each a pattern and
	// how many more commands holding it lose their reply.
	drops []*drop
	// Dropped counts the replies dropped so far.
	Dropped atomic.Int64
}

// drop is one armed lost reply.
type drop struct {
	pattern []byte
	left    int
}

// Start starts a proxy on a free loopback port to target (host:port); the
// test's cleanup stops it.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := Listen(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// Listen starts a proxy on a free loopback port to target.
func Listen(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, healed: make(chan struct{})}
	close(p.healed)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Stall partitions: from now on no byte moves in either direction on any
// connection, open or new, and none is closed, until Heal. Bytes read
// before the stall are held and delivered after it.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stalled {
		p.stalled = true
		p.healed = make(chan struct{})
	}
}

// Heal ends a stall: held bytes flow again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled {
		p.stalled = false
		close(p.healed)
	}
}

// DropReply arms n lost replies: each of the next n writes from a client
// that holds pattern (a command's bytes, e.g. a script's name) is
// forwarded to the server, and the server's answer to it is dropped and
// both connections closed. The command ran; the client sees only EOF.
func (p *Proxy) DropReply(pattern string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drops = append(p.drops, &drop{pattern: []byte(pattern), left: n})
}

// Disarm forgets the lost replies still armed.
func (p *Proxy) Disarm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drops = nil
}

// takeDrop tells whether the client's bytes b must lose their reply, and
// counts the armed drop down.
func (p *Proxy) takeDrop(b []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range p.drops {
		if d.left > 0 && bytes.Contains(b, d.pattern) {
			d.left--
			return true
		}
	}
	return false
}

// Cut closes every open connection (new ones are accepted as usual).
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	_ = p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	if p.stalled {
		p.stalled = false
		close(p.healed)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// gate returns a channel that is closed while no stall holds bytes back.
func (p *Proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.healed
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	if !p.track(client) {
		return
	}
	defer p.untrack(client)
	<-p.gate() // a partition also holds new connections
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	var lose atomic.Bool // the server's next reply is dropped
	go func() { p.pipe(server, client, &lose, true); done <- struct{}{} }()
	go func() { p.pipe(client, server, &lose, false); done <- struct{}{} }()
	<-done
}

// pipe copies src to dst, holding each read's bytes while a stall lasts;
// it closes both ends when either fails. Going to the server (toServer),
// a write that an armed DropReply matches sets lose before it is sent;
// coming back, bytes read while lose is set are dropped and both ends
// closed.
func (p *Proxy) pipe(dst, src net.Conn, lose *atomic.Bool, toServer bool) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate()
			if toServer && p.takeDrop(buf[:n]) {
				lose.Store(true)
			}
			if !toServer && lose.Load() {
				p.Dropped.Add(1)
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
