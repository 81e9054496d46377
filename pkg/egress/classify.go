package egress

import "net/netip"

// special is one range of addresses that is not the public internet, with
// what Classify calls it. The first range containing an address wins, so
// the narrower ranges come first.
type special struct {
	prefix netip.Prefix
	reason string
}

var specials = func() []special {
	var out []special
	add := func(reason string, prefixes ...string) {
		for _, p := range prefixes {
			out = append(out, special{netip.MustParsePrefix(p), reason})
		}
	}
	add("an unspecified address", "0.0.0.0/8", "::/128")
	add("a loopback address", "127.0.0.0/8", "::1/128")
	// Cloud instance metadata: AWS, GCP, Azure, OpenStack and others on
	// 169.254.169.254, AWS's IPv6 endpoint, ECS task metadata.
	add("a cloud metadata address", "169.254.169.254/32", "169.254.170.2/32", "fd00:ec2::254/128")
	add("a link-local address", "169.254.0.0/16", "fe80::/10")
	add("a private address", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7", "fec0::/10")
	add("a shared (carrier-grade NAT) address", "100.64.0.0/10")
	add("a multicast address", "224.0.0.0/4", "ff00::/8")
	add("a broadcast address", "255.255.255.255/32")
	add("a reserved address",
		"192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4",
		"::/96", "100::/64", "2001:db8::/32")
	return out
}()

// Embedded IPv4: NAT64 (64:ff9b::/96, the IPv4 address in the last 32
// bits) and 6to4 (2002::/16, the IPv4 address in bits 16..47) reach the
// IPv4 address they carry, so they are classified as that address.
var (
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4  = netip.MustParsePrefix("2002::/16")
	nat64Lo = netip.MustParsePrefix("64:ff9b:1::/48") // local-use NAT64: a private network's
)

// Classify says what kind of non-public address ip is ("a loopback
// address", "a private address", …), or "" for a public address. IPv4
// addresses in IPv6 forms (IPv4-mapped, NAT64, 6to4) are classified as
// the IPv4 address.
func Classify(ip netip.Addr) string {
	ip = ip.WithZone("").Unmap()
	if !ip.IsValid() {
		return "an invalid address"
	}
	if ip.Is6() {
		b := ip.As16()
		switch {
		case nat64Lo.Contains(ip):
			return "a private address"
		case nat64.Contains(ip):
			return Classify(netip.AddrFrom4([4]byte(b[12:16])))
		case sixTo4.Contains(ip):
			return Classify(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	for _, s := range specials {
		if s.prefix.Contains(ip) {
			return s.reason
		}
	}
	return ""
}
