// Package egress decides which network addresses Sundial's outbound webhooks
// (the sundial.http job type) may reach, so that a job's submitter cannot
// make a worker call loopback, cluster-internal or cloud metadata addresses
// and read the answer back.
//
// A Policy allows every public address and refuses the rest (loopback,
// link-local, private, shared, multicast, unspecified and reserved ranges,
// in their IPv4-mapped forms too) unless one of its entries allows them.
// It decides on the address actually dialled, after name resolution
// (Policy.DialContext), so a name that resolves to 127.0.0.1 is refused
// like 127.0.0.1 itself.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Variable is the environment variable the policy is read from
// (pkg/config); refusals name it so that an operator knows where to allow
// an address.
const Variable = "SUNDIAL_HTTP_JOB_ALLOW"

// DialTimeout bounds one connection attempt to one address.
const DialTimeout = 10 * time.Second

// Resolver looks up the addresses of a host name; *net.Resolver is one.
// network is "ip", "ip4" or "ip6".
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Policy is the set of destinations outbound webhooks may reach: every
// public address, plus what its entries allow. The zero value (and a nil
// *Policy) allows public addresses only. A Policy is safe for concurrent
// use once built; set Resolver before use, not while dialling.
type Policy struct {
	// Resolver resolves host names before the policy checks the addresses;
	// nil means net.DefaultResolver. Tests set it to map a name to an
	// address without DNS.
	Resolver Resolver

	star     bool
	names    []nameRule
	prefixes []prefixRule
}

// nameRule allows a host name, or every name under a domain, whatever it
// resolves to.
type nameRule struct {
	name     string // lower case, no trailing dot; for a wildcard the domain after "*."
	wildcard bool
	port     string // "" = any port
}

// prefixRule allows the addresses of a prefix (one address: /32 or /128).
type prefixRule struct {
	prefix netip.Prefix
	port   string // "" = any port
}

// ParsePolicy parses a comma-separated list of entries, each one of:
//
//   - every public address (always allowed: the entry only says so)
//     api.example.com      a host name, on any port, whatever it resolves to
//     hooks.example.com:8443   a host name on one port
//     *.example.com        every name under example.com (not example.com itself); a port may follow
//     10.1.0.0/16          the addresses of a CIDR prefix, IPv4 or IPv6
//     127.0.0.1, ::1       one address; 127.0.0.1:8080 or [::1]:8080 for one port
//
// Host names are compared without regard to case. Empty entries are
// ignored, so "" parses to the default policy. The error names the first
// bad entry.
func ParsePolicy(s string) (*Policy, error) {
	p := &Policy{}
	seen := map[string]bool{}
	for _, raw := range strings.Split(s, ",") {
		e := strings.TrimSpace(raw)
		if e == "" {
			continue
		}
		canon, err := p.add(e)
		if err != nil {
			return nil, fmt.Errorf("entry %q: %v", e, err)
		}
		if seen[canon] {
			return nil, fmt.Errorf("entry %q: listed twice", e)
		}
		seen[canon] = true
	}
	return p, nil
}

// add parses one entry into p and returns its canonical form.
func (p *Policy) add(e string) (string, error) {
	if e == "*" {
		p.star = true
		return "*", nil
	}
	if strings.Contains(e, "://") || strings.ContainsAny(e, "?#@") {
		return "", errors.New("write a host, host:port, *.domain, address or CIDR prefix, not a URL")
	}
	if strings.Contains(e, "/") {
		pre, err := netip.ParsePrefix(e)
		if err != nil {
			return "", errors.New("not a CIDR prefix such as 10.1.0.0/16 or fd00:1::/64")
		}
		if pre.Masked() != pre {
			return "", fmt.Errorf("the prefix has bits set past /%d: write %s", pre.Bits(), pre.Masked())
		}
		pre = unmapPrefix(pre)
		p.prefixes = append(p.prefixes, prefixRule{prefix: pre})
		return pre.String(), nil
	}
	if ip, err := netip.ParseAddr(e); err == nil {
		if ip.Zone() != "" {
			return "", errors.New("an address with a zone (%) cannot be allowed; use its prefix")
		}
		ip = ip.Unmap()
		p.prefixes = append(p.prefixes, prefixRule{prefix: netip.PrefixFrom(ip, ip.BitLen())})
		return ip.String(), nil
	}
	host, port := e, ""
	if strings.Contains(e, ":") {
		h, pt, err := net.SplitHostPort(e)
		if err != nil {
			return "", errors.New("not host:port (an IPv6 address with a port is written [::1]:8080)")
		}
		n, err := strconv.Atoi(pt)
		if err != nil || n < 1 || n > 65535 || pt != strconv.Itoa(n) {
			return "", fmt.Errorf("port %q must be a number between 1 and 65535", pt)
		}
		host, port = h, pt
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return "", errors.New("an address with a zone (%) cannot be allowed; use its prefix")
		}
		ip = ip.Unmap()
		p.prefixes = append(p.prefixes, prefixRule{prefix: netip.PrefixFrom(ip, ip.BitLen()), port: port})
		return netip.AddrPortFrom(ip, uint16(mustAtoi(port))).String(), nil
	}
	r := nameRule{port: port}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		r.wildcard, host = true, rest
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if err := checkName(host); err != nil {
		return "", err
	}
	r.name = host
	p.names = append(p.names, r)
	return r.String(), nil
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// unmapPrefix writes a prefix of IPv4-mapped IPv6 addresses as the IPv4
// prefix, the form addresses are compared in.
func unmapPrefix(pre netip.Prefix) netip.Prefix {
	if pre.Addr().Is4In6() && pre.Bits() >= 96 {
		return netip.PrefixFrom(pre.Addr().Unmap(), pre.Bits()-96)
	}
	return pre
}

// checkName reports whether s is a DNS host name: dot-separated labels of
// letters, digits, '-' and '_', each 1..63 long, 253 in all.
func checkName(s string) error {
	if s == "" {
		return errors.New("empty host name")
	}
	if strings.Contains(s, "*") {
		return errors.New("a * may only stand alone or begin a pattern: *.example.com")
	}
	if len(s) > 253 {
		return errors.New("host name longer than 253 characters")
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return errors.New("not a host name: each dot-separated label is 1 to 63 characters")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return errors.New("not a host name: a label may not begin or end with '-'")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("not a host name: %q is not allowed in one", c)
			}
		}
	}
	if last := labels[len(labels)-1]; strings.Trim(last, "0123456789") == "" {
		return errors.New("looks like an address but is not one (an IPv4 address has four numbers)")
	}
	return nil
}

func (r nameRule) String() string {
	s := r.name
	if r.wildcard {
		s = "*." + s
	}
	if r.port != "" {
		s += ":" + r.port
	}
	return s
}

func (r prefixRule) String() string {
	a := r.prefix.Addr()
	switch {
	case r.prefix.Bits() != a.BitLen():
		return r.prefix.String()
	case r.port != "":
		return netip.AddrPortFrom(a, uint16(mustAtoi(r.port))).String()
	}
	return a.String()
}

// String returns the policy's entries in canonical form, comma-separated,
// as ParsePolicy reads them; "" for the default policy.
func (p *Policy) String() string {
	if p == nil {
		return ""
	}
	var out []string
	if p.star {
		out = append(out, "*")
	}
	for _, r := range p.names {
		out = append(out, r.String())
	}
	for _, r := range p.prefixes {
		out = append(out, r.String())
	}
	return strings.Join(out, ",")
}

// RefusedError is the error of a destination the policy refuses.
type RefusedError struct {
	// Host is the host as the request named it, a name or an address.
	Host string
	// Addr is the address refused (the one Host resolved to, for a name).
	Addr netip.AddrPort
	// Reason says what kind of address it is, e.g. "a loopback address".
	Reason string
}

func (e *RefusedError) Error() string {
	what := e.Addr.String() + " is"
	if ip, err := netip.ParseAddr(e.Host); err != nil || ip.WithZone("").Unmap() != e.Addr.Addr() {
		what = net.JoinHostPort(e.Host, strconv.Itoa(int(e.Addr.Port()))) + " resolves to " + e.Addr.Addr().String() + ","
	}
	return fmt.Sprintf("%s %s, refused by the webhook policy (allow it with %s)", what, e.Reason, Variable)
}

// allowsName reports whether a name entry allows host (lower case, no
// trailing dot) on port.
func (p *Policy) allowsName(host, port string) bool {
	if p == nil {
		return false
	}
	for _, r := range p.names {
		if r.port != "" && r.port != port {
			continue
		}
		if r.wildcard && strings.HasSuffix(host, "."+r.name) || !r.wildcard && host == r.name {
			return true
		}
	}
	return false
}

// checkAddr returns a *RefusedError unless the policy allows ip on port;
// host is what the request named, for the error.
func (p *Policy) checkAddr(host string, ip netip.Addr, port uint16) error {
	ip = ip.WithZone("").Unmap()
	if p != nil {
		ps := strconv.Itoa(int(port))
		for _, r := range p.prefixes {
			if (r.port == "" || r.port == ps) && r.prefix.Contains(ip) {
				return nil
			}
		}
	}
	if reason := Classify(ip); reason != "" {
		return &RefusedError{Host: host, Addr: netip.AddrPortFrom(ip, port), Reason: reason}
	}
	return nil
}

// CheckURL checks what can be checked of a request's URL before any name
// is resolved: the scheme is http or https, and an address in the host is
// allowed. Names are checked when they are dialled (DialContext). It
// returns a *RefusedError for a refused address.
func (p *Policy) CheckURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("scheme %q: only http and https", u.Scheme)
	}
	host := u.Hostname()
	if host == "" {
		return errors.New("the URL has no host")
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return nil
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return fmt.Errorf("bad port %q", port)
	}
	return p.checkAddr(host, ip, uint16(n))
}

// DialContext connects to address ("host:port") like net.Dialer.DialContext,
// for an http.Transport: it resolves a name itself (through Resolver), then
// dials only the addresses the policy allows, by address, so nothing is
// resolved again between the check and the connection. A name entry
// allows every address of its names. When every address is refused the
// error is a *RefusedError and no connection was attempted.
func (p *Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("bad port in %q", address)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := p.checkAddr(host, ip, uint16(port)); err != nil {
			return nil, err
		}
		return p.dial(ctx, network, host, netip.AddrPortFrom(ip, uint16(port)), false)
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	byName := p.allowsName(name, portStr)
	var r Resolver = net.DefaultResolver
	if p != nil && p.Resolver != nil {
		r = p.Resolver
	}
	ipNet := "ip"
	switch network {
	case "tcp4":
		ipNet = "ip4"
	case "tcp6":
		ipNet = "ip6"
	}
	ips, err := r.LookupNetIP(ctx, ipNet, host)
	if err != nil {
		return nil, err
	}
	var refused, dialErr error
	for _, ip := range ips {
		ip = ip.Unmap()
		if !byName {
			if err := p.checkAddr(host, ip, uint16(port)); err != nil {
				if refused == nil {
					refused = err
				}
				continue
			}
		}
		c, err := p.dial(ctx, network, host, netip.AddrPortFrom(ip, uint16(port)), byName)
		if err == nil {
			return c, nil
		}
		dialErr = err
		if ctx.Err() != nil {
			break
		}
	}
	switch {
	case dialErr != nil:
		return nil, dialErr
	case refused != nil:
		return nil, refused
	}
	return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
}

// dial connects to one address. Unless a name entry allowed the host, the
// dialer's Control checks the address once more as the socket connects:
// the check applies to the address actually dialled.
func (p *Policy) dial(ctx context.Context, network, host string, ap netip.AddrPort, byName bool) (net.Conn, error) {
	d := net.Dialer{Timeout: DialTimeout}
	if !byName {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			got, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("egress: unexpected address %q", address)
			}
			return p.checkAddr(host, got.Addr(), got.Port())
		}
	}
	return d.DialContext(ctx, network, ap.String())
}
