package access

import "testing"

func TestPatterns(t *testing.T) {
	p, err := Parse("billing-*|ops")
	if err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]bool{"billing-eu": true, "billing-": true, "ops": true, "ops-x": false, "billing": false, "xbilling-a": false} {
		if got := p.Allows(q); got != want {
			t.Errorf("Allows(%q) = %v, want %v", q, got, want)
		}
	}
	if !All.Allows("anything") || All.Limited() {
		t.Error("the zero Patterns must allow every queue")
	}
	if star, _ := Parse("*"); star.Limited() {
		t.Error(`"*" must allow every queue`)
	}
	for _, bad := range []string{"", "a||b", "Billing", "a/b", "[a]", "a?"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	if got := p.Union(All); got.Limited() {
		t.Errorf("union with All = %v", got)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("billing-*|ops")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(s)
		if err == nil && p.String() != s && s != "*" && p.Limited() {
			t.Errorf("round trip %q → %q", s, p.String())
		}
	})
}
