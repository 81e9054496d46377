package job

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// The validators against the regular expressions the docs state (the
// validators were these expressions once): every name from a random mix
// of allowed and disallowed bytes and lengths around the limits.
func TestNamesMatchTheirExpressions(t *testing.T) {
	for _, v := range []struct {
		name  string
		re    *regexp.Regexp
		valid func(string) bool
		max   int
		often string // the bytes most names are made of
	}{
		{"queue", regexp.MustCompile(`^[a-z0-9_-]{1,64}$`), ValidQueue, 64, "abxyz09_-"},
		{"type", regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`), ValidType, 128, "abcxyzABCXYZ0189_.:-"},
		{"group", regexp.MustCompile(`^[A-Za-z0-9_.:@-]{1,128}$`), ValidGroup, 128, "abcxyzABCXYZ0189_.:-@"},
	} {
		rng := rand.New(rand.NewPCG(1, 2))
		const alphabet = "azAZ09_.:@-/ \x00\xff\xc3\xa9"
		accepted := 0
		for range 20000 {
			n := rng.IntN(v.max + 3)
			var b strings.Builder
			for range n {
				if rng.IntN(20) == 0 {
					b.WriteByte(alphabet[rng.IntN(len(alphabet))])
				} else {
					b.WriteByte(v.often[rng.IntN(len(v.often))])
				}
			}
			s := b.String()
			if got, want := v.valid(s), v.re.MatchString(s); got != want {
				t.Fatalf("%s %q: valid %v, the expression says %v", v.name, s, got, want)
			}
			if v.valid(s) {
				accepted++
			}
		}
		if accepted < 1000 {
			t.Fatalf("%s: only %d of the names were valid: the test compares too little", v.name, accepted)
		}
	}
}

func TestTraceparentMatchesItsExpression(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)
	want := func(s string) bool {
		return re.MatchString(s) && s[:2] != "ff" && strings.Trim(s[3:35], "0") != "" && strings.Trim(s[36:52], "0") != ""
	}
	base := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	cases := []string{base, "", base[:54], base + "0", "ff" + base[2:], "00-" + strings.Repeat("0", 32) + base[35:],
		base[:36] + strings.Repeat("0", 16) + base[52:], strings.ToUpper(base), strings.Replace(base, "-", "_", 1)}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		b := []byte(base)
		for range rng.IntN(3) {
			b[rng.IntN(len(b))] = "0f9a-gZ0\x00"[rng.IntN(9)]
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		if got := ValidTraceparent(s); got != want(s) {
			t.Fatalf("%q: valid %v, want %v", s, got, want(s))
		}
	}
}
