// Package access decides which queues a caller may see. A team's API key or
// sign-in role is limited to queue patterns ("billing-*", "ops-*"); for it,
// every queue outside them, and everything in one, does not exist.
package access

import (
	"fmt"
	"path"
	"strings"
)

// Patterns is a set of queue-name patterns: a queue name, or one with '*'
// standing for any run of characters ("billing-*", "*-eu", "*"). The zero
// value allows every queue.
type Patterns struct {
	list []string
}

// All allows every queue.
var All = Patterns{}

// Parse reads patterns separated by '|': "billing-*|ops-*". Each is 1..64
// characters of a-z, 0-9, '_', '-' and '*'.
func Parse(s string) (Patterns, error) {
	var p Patterns
	for _, e := range strings.Split(s, "|") {
		if !validPattern(e) {
			return Patterns{}, fmt.Errorf("queue pattern %q: want 1-64 characters of a-z, 0-9, _, - and *", e)
		}
		p.list = append(p.list, e)
	}
	return p, nil
}

func validPattern(e string) bool {
	if e == "" || len(e) > 64 {
		return false
	}
	for i := 0; i < len(e); i++ {
		ch := e[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '_' || ch == '-' || ch == '*') {
			return false
		}
	}
	return true
}

// Limited reports whether p allows fewer than every queue.
func (p Patterns) Limited() bool {
	for _, e := range p.list {
		if e == "*" {
			return false
		}
	}
	return len(p.list) > 0
}

// Allows reports whether queue q is visible under p.
func (p Patterns) Allows(q string) bool {
	if !p.Limited() {
		return true
	}
	for _, e := range p.list {
		// Queue names hold no '/', '?', '[' or '\\', so path.Match reads
		// only '*' as special; a valid pattern cannot be malformed.
		if ok, _ := path.Match(e, q); ok {
			return true
		}
	}
	return false
}

// Filter returns the queues of qs that p allows, in order.
func (p Patterns) Filter(qs []string) []string {
	if !p.Limited() {
		return qs
	}
	out := make([]string, 0, len(qs))
	for _, q := range qs {
		if p.Allows(q) {
			out = append(out, q)
		}
	}
	return out
}

// Union returns the patterns that allow what p or o allows.
func (p Patterns) Union(o Patterns) Patterns {
	if !p.Limited() || !o.Limited() {
		return All
	}
	return Patterns{list: append(append([]string{}, p.list...), o.list...)}
}

// String is p in Parse's syntax; "*" for every queue.
func (p Patterns) String() string {
	if !p.Limited() {
		return "*"
	}
	return strings.Join(p.list, "|")
}
