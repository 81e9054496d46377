package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestParsePolicy(t *testing.T) {
	for _, c := range []struct {
		in, want string // want: the canonical form
	}{
		{"", ""},
		{" , ,", ""},
		{"*", "*"},
		{"API.Example.com", "api.example.com"},
		{"api.example.com.", "api.example.com"},
		{"hooks.example.com:8443", "hooks.example.com:8443"},
		{"*.example.com", "*.example.com"},
		{"*.Example.com:443", "*.example.com:443"},
		{"10.1.0.0/16", "10.1.0.0/16"},
		{"fd00:1::/64", "fd00:1::/64"},
		{"::ffff:10.0.0.0/104", "10.0.0.0/8"},
		{"127.0.0.1", "127.0.0.1"},
		{"::1", "::1"},
		{"::ffff:127.0.0.1", "127.0.0.1"},
		{"127.0.0.1:8080", "127.0.0.1:8080"},
		{"[::1]:8080", "[::1]:8080"},
		{"redis_internal", "redis_internal"},
		{"localhost", "localhost"},
		{"*, api.example.com , 10.0.0.0/8", "*,api.example.com,10.0.0.0/8"},
	} {
		p, err := ParsePolicy(c.in)
		if err != nil {
			t.Errorf("ParsePolicy(%q): %v", c.in, err)
			continue
		}
		if got := p.String(); got != c.want {
			t.Errorf("ParsePolicy(%q).String() = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestParsePolicyRefuses(t *testing.T) {
	for _, c := range []struct {
		in, want string // want: in the error
	}{
		{"https://api.example.com", "not a URL"},
		{"api.example.com/hook", "not a CIDR prefix"},
		{"user@host", "not a URL"},
		{"10.1.2.3/16", "write 10.1.0.0/16"},
		{"10.0.0.0/33", "not a CIDR prefix"},
		{"host:0", "between 1 and 65535"},
		{"host:70000", "between 1 and 65535"},
		{"host:http", "between 1 and 65535"},
		{"host:080", "between 1 and 65535"},
		{"::1:8080:", "not host:port"},
		{"fe80::1%eth0", "zone"},
		{"a*.example.com", "a * may only"},
		{"*.*.example.com", "a * may only"},
		{"**", "a * may only"},
		{"exa mple.com", "not allowed"},
		{"-bad.example.com", "may not begin or end"},
		{"a..b", "1 to 63"},
		{"10.1", "looks like an address"},
		{"999.1.1.1", "looks like an address"},
		{"api.example.com,API.example.com", "listed twice"},
		{"127.0.0.1,::ffff:127.0.0.1", "listed twice"},
		{strings.Repeat("a", 64) + ".com", "1 to 63"},
	} {
		_, err := ParsePolicy(c.in)
		if err == nil {
			t.Errorf("ParsePolicy(%q) succeeded; want an error about %q", c.in, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParsePolicy(%q) = %v; want it to say %q", c.in, err, c.want)
		}
		if !strings.HasPrefix(err.Error(), "entry ") {
			t.Errorf("ParsePolicy(%q) = %v; want it to name the entry", c.in, err)
		}
	}
}

// FuzzParsePolicy: the parser never panics, and what it accepts it writes
// in a canonical form that parses back to the same policy.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range []string{"", "*", "api.example.com", "hooks.example.com:8443", "*.example.com", "10.1.0.0/16",
		"127.0.0.1", "[::1]:8080", "::ffff:10.0.0.0/104", "a,b,c", "fe80::1%eth0", "https://x", "10.1.2.3/16"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePolicy(s)
		if err != nil {
			if p != nil {
				t.Fatalf("ParsePolicy(%q) returned a policy and an error", s)
			}
			return
		}
		canon := p.String()
		q, err := ParsePolicy(canon)
		if err != nil {
			t.Fatalf("ParsePolicy(%q) gave %q, which does not parse: %v", s, canon, err)
		}
		if q.String() != canon {
			t.Fatalf("%q → %q → %q: not canonical", s, canon, q.String())
		}
	})
}

func TestClassify(t *testing.T) {
	for _, c := range []struct{ ip, want string }{
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"2606:4700:4700::1111", ""},
		{"100.63.255.255", ""},
		{"172.32.0.1", ""},
		{"127.0.0.1", "a loopback address"},
		{"127.255.0.9", "a loopback address"},
		{"::1", "a loopback address"},
		{"::ffff:127.0.0.1", "a loopback address"},
		{"0.0.0.0", "an unspecified address"},
		{"0.1.2.3", "an unspecified address"},
		{"::", "an unspecified address"},
		{"169.254.169.254", "a cloud metadata address"},
		{"::ffff:169.254.169.254", "a cloud metadata address"},
		{"fd00:ec2::254", "a cloud metadata address"},
		{"169.254.1.1", "a link-local address"},
		{"fe80::1", "a link-local address"},
		{"fe80::1%eth0", "a link-local address"},
		{"10.0.0.1", "a private address"},
		{"172.16.0.1", "a private address"},
		{"172.31.255.255", "a private address"},
		{"192.168.1.1", "a private address"},
		{"::ffff:192.168.1.1", "a private address"},
		{"fd12:3456::1", "a private address"},
		{"100.64.0.1", "a shared (carrier-grade NAT) address"},
		{"224.0.0.1", "a multicast address"},
		{"ff02::1", "a multicast address"},
		{"255.255.255.255", "a broadcast address"},
		{"240.0.0.1", "a reserved address"},
		{"::127.0.0.1", "a reserved address"},
		{"64:ff9b::7f00:1", "a loopback address"},
		{"64:ff9b::a9fe:a9fe", "a cloud metadata address"},
		{"64:ff9b::808:808", ""},
		{"2002:7f00:1::1", "a loopback address"},
		{"2002:a00:1::1", "a private address"},
	} {
		if got := Classify(netip.MustParseAddr(c.ip)); got != c.want {
			t.Errorf("Classify(%s) = %q, want %q", c.ip, got, c.want)
		}
	}
}

// fakeResolver answers from a table, as DNS would.
type fakeResolver map[string][]string

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	addrs, ok := f[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, a := range addrs {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

func mustPolicy(t *testing.T, s string) *Policy {
	t.Helper()
	p, err := ParsePolicy(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// listen starts a TCP listener on addr that counts the connections it
// accepts.
func listen(t *testing.T, addr string) (port string, accepted <-chan struct{}) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	t.Cleanup(func() { l.Close() })
	ch := make(chan struct{}, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
			ch <- struct{}{}
		}
	}()
	_, port, _ = net.SplitHostPort(l.Addr().String())
	return port, ch
}

func TestDialContext(t *testing.T) {
	port4, accepted4 := listen(t, "127.0.0.1:0")
	port6, accepted6 := listen(t, "[::1]:0")
	names := fakeResolver{
		"evil.test":     {"127.0.0.1"},
		"mixed.test":    {"10.0.0.1", "127.0.0.1"},
		"hooks.test":    {"127.0.0.1"},
		"a.corp.test":   {"127.0.0.1"},
		"corp.test":     {"127.0.0.1"},
		"evilcorp.test": {"127.0.0.1"},
		"evil6.test":    {"::1"},
	}
	for _, c := range []struct {
		name, policy, addr string
		accepted           <-chan struct{}
		refused            string // "" = connects
	}{
		{"loopback", "", "127.0.0.1:" + port4, accepted4, "127.0.0.1:" + port4 + " is a loopback address, refused by the webhook policy (allow it with SUNDIAL_HTTP_JOB_ALLOW)"},
		{"IPv6 loopback", "", "[::1]:" + port6, accepted6, "[::1]:" + port6 + " is a loopback address"},
		{"IPv4-mapped loopback", "", "[::ffff:127.0.0.1]:" + port4, accepted4, "is a loopback address"},
		{"name resolving to loopback", "", "evil.test:" + port4, accepted4, "evil.test:" + port4 + " resolves to 127.0.0.1, a loopback address"},
		{"name resolving to IPv6 loopback", "", "evil6.test:" + port6, accepted6, "resolves to ::1, a loopback address"},
		{"every address refused", "", "mixed.test:" + port4, accepted4, "resolves to 10.0.0.1, a private address"},
		{"loopback listed", "127.0.0.1", "127.0.0.1:" + port4, accepted4, ""},
		{"loopback listed with its port", "127.0.0.1:" + port4, "127.0.0.1:" + port4, accepted4, ""},
		{"loopback listed on another port", "127.0.0.1:1", "127.0.0.1:" + port4, accepted4, "is a loopback address"},
		{"loopback prefix listed", "127.0.0.0/8", "evil.test:" + port4, accepted4, ""},
		{"IPv6 loopback listed", "::1", "[::1]:" + port6, accepted6, ""},
		{"IPv4 listing leaves IPv6 refused", "127.0.0.1", "[::1]:" + port6, accepted6, "is a loopback address"},
		{"name listed", "hooks.test", "hooks.test:" + port4, accepted4, ""},
		{"name listed, other name refused", "hooks.test", "evil.test:" + port4, accepted4, "resolves to 127.0.0.1, a loopback address"},
		{"pattern listed", "*.corp.test", "a.corp.test:" + port4, accepted4, ""},
		{"pattern does not list the domain itself", "*.corp.test", "corp.test:" + port4, accepted4, "a loopback address"},
		{"pattern does not list a look-alike", "*.corp.test", "evilcorp.test:" + port4, accepted4, "a loopback address"},
		{"only the allowed address of a name is dialled", "10.0.0.0/8,127.0.0.1", "mixed.test:" + port4, accepted4, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := mustPolicy(t, c.policy)
			p.Resolver = names
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			conn, err := p.DialContext(ctx, "tcp", c.addr)
			if c.refused == "" {
				if err != nil {
					t.Fatalf("dial %s under %q: %v", c.addr, c.policy, err)
				}
				conn.Close()
				select {
				case <-c.accepted:
				case <-ctx.Done():
					t.Fatal("the listener saw no connection")
				}
				return
			}
			var refused *RefusedError
			if !errors.As(err, &refused) {
				if conn != nil {
					conn.Close()
				}
				t.Fatalf("dial %s under %q: %v, want a refusal", c.addr, c.policy, err)
			}
			if !strings.Contains(err.Error(), c.refused) {
				t.Errorf("refusal %q does not say %q", err, c.refused)
			}
			select {
			case <-c.accepted:
				t.Error("the listener was connected to although the policy refused")
			default:
			}
		})
	}
}

// TestRefusesBeforeConnecting: addresses nobody listens on here (a private
// address, the metadata address) are refused at once by the policy, not
// after a connection attempt times out; listed, they are dialled.
func TestRefusesBeforeConnecting(t *testing.T) {
	for _, addr := range []string{"10.255.255.1:80", "169.254.169.254:80", "[fd00:ec2::254]:80", "192.168.255.1:80", "100.64.0.1:80", "[fe80::1]:80", "0.0.0.0:80", "[::]:80"} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		conn, err := (*Policy)(nil).DialContext(ctx, "tcp", addr)
		cancel()
		var refused *RefusedError
		if !errors.As(err, &refused) {
			if conn != nil {
				conn.Close()
			}
			t.Errorf("dial %s: %v, want a refusal by the policy", addr, err)
		}
	}
	// Listed, the metadata address is dialled (and fails here by timeout
	// or as unreachable, not by the policy).
	p := mustPolicy(t, "169.254.169.254")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	conn, err := p.DialContext(ctx, "tcp", "169.254.169.254:80")
	if conn != nil {
		conn.Close()
	}
	var refused *RefusedError
	if errors.As(err, &refused) {
		t.Errorf("169.254.169.254 is listed; the policy refused it: %v", err)
	}
}

func TestCheckURL(t *testing.T) {
	p := mustPolicy(t, "10.0.0.0/8")
	for _, c := range []struct{ url, want string }{
		{"http://example.com/", ""},
		{"https://8.8.8.8/x", ""},
		{"http://10.1.2.3:8080/", ""},
		{"http://127.0.0.1/", "127.0.0.1:80 is a loopback address"},
		{"https://[::1]/", "[::1]:443 is a loopback address"},
		{"http://169.254.169.254/latest/meta-data/", "a cloud metadata address"},
		{"http://[::ffff:a9fe:a9fe]/", "a cloud metadata address"},
		{"ftp://example.com/", "only http and https"},
		{"http:///x", "no host"},
	} {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		err = p.CheckURL(u)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("CheckURL(%s): %v", c.url, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("CheckURL(%s) = %v, want %q", c.url, err, c.want)
		}
	}
}
