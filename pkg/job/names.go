package job

import "strings"

// Charset is a set of bytes allowed in a name. A table lookup per byte:
// names are checked for every submitted job, where a regular expression
// cost ~5 % of the API's CPU on batch submits.
type Charset [256]bool

// NewCharset returns the set of the bytes in chars, where "a-z" stands for
// a range.
func NewCharset(chars string) *Charset {
	var cs Charset
	for i := 0; i < len(chars); i++ {
		if i+2 < len(chars) && chars[i+1] == '-' {
			for c := chars[i]; c <= chars[i+2]; c++ {
				cs[c] = true
			}
			i += 2
			continue
		}
		cs[chars[i]] = true
	}
	return &cs
}

// Match reports whether s has 1 to max bytes, each in the set.
func (cs *Charset) Match(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !cs[s[i]] {
			return false
		}
	}
	return true
}

var (
	queueChars = NewCharset("a-z0-9_-")
	typeChars  = NewCharset("A-Za-z0-9_.:-")
	groupChars = NewCharset("A-Za-z0-9_.:@-")
	hexChars   = NewCharset("0-9a-f")
)

// ValidQueue reports whether name is a valid queue name: [a-z0-9_-]{1,64}.
func ValidQueue(name string) bool { return queueChars.Match(name, 64) }

// ValidType reports whether name is a valid job type: [A-Za-z0-9_.:-]{1,128}.
func ValidType(name string) bool { return typeChars.Match(name, 128) }

// ValidGroup reports whether name is a valid fairness group:
// [A-Za-z0-9_.:@-]{1,128}.
func ValidGroup(name string) bool { return groupChars.Match(name, 128) }

// ValidTraceparent reports whether s is a W3C traceparent of a version
// this code reads: two hex digits of version (not ff), a trace id and a
// parent id that are not all zeros, and the flags
// ("00-<32 hex>-<16 hex>-01").
func ValidTraceparent(s string) bool {
	if len(s) != 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' || s[:2] == "ff" {
		return false
	}
	for _, part := range []string{s[:2], s[3:35], s[36:52], s[53:]} {
		if !hexChars.Match(part, 32) {
			return false
		}
	}
	return strings.Trim(s[3:35], "0") != "" && strings.Trim(s[36:52], "0") != ""
}

var tagChars = NewCharset("A-Za-z0-9_.:=/-")

// ValidTag reports whether s is a job tag: [A-Za-z0-9_.:=/-]{1,64}.
func ValidTag(s string) bool { return tagChars.Match(s, 64) }

// ValidOptionKey reports whether s is a sequence or debounce key: 1 to
// MaxOptionKeyLen bytes of printable characters (no control characters:
// the engine's options are lines).
func ValidOptionKey(s string) bool {
	if s == "" || len(s) > MaxOptionKeyLen {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}
