package jsonbody

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

type backoff struct {
	Base int `json:"base_seconds"`
}

type spec struct {
	Type    string     `json:"type"`
	Count   *int       `json:"count"`
	RunAt   *time.Time `json:"run_at"`
	Backoff *backoff   `json:"backoff"`
}

type wrapper struct {
	ID  string `json:"id"`
	Job spec   `json:"job"`
}

func TestExplain(t *testing.T) {
	t.Parallel()
	specWhere := Where{Nested: []string{"backoff"}, TimeField: "run_at"}
	cases := []struct {
		name, doc  string
		into       any
		where      Where
		field, msg string
	}{
		{"unknown member", `{"type":"a","tpye":"b"}`, &spec{}, specWhere, "tpye", `unknown field "tpye"`},
		{"unknown member of a nested object", `{"type":"a","backoff":{"base":1}}`, &spec{}, specWhere, "backoff.base", `unknown field "backoff.base"`},
		{"unknown member two levels down", `{"id":"x","job":{"type":"a","backoff":{"zz":1}}}`, &wrapper{},
			Where{Nested: []string{"job", "job.backoff"}}, "job.backoff.zz", `unknown field "job.backoff.zz"`},
		{"unknown member one level down, before the deeper one", `{"id":"x","job":{"zz":1,"backoff":{}}}`, &wrapper{},
			Where{Nested: []string{"job", "job.backoff"}}, "job.zz", `unknown field "job.zz"`},
		{"unknown member under a prefix", `{"type":"a","backoff":{"x":1}}`, &spec{},
			Where{Prefix: "jobs[3]", Nested: []string{"backoff"}}, "jobs[3].backoff.x", `unknown field "jobs[3].backoff.x"`},
		{"wrong kind", `{"type":"a","count":"5"}`, &spec{}, specWhere, "count", "count must be an integer"},
		{"wrong kind, nested", `{"id":"x","job":{"type":5}}`, &wrapper{}, Where{}, "job.type", "job.type must be a string"},
		{"wrong kind under a prefix", `{"count":true}`, &spec{}, Where{Prefix: "jobs[0]"}, "jobs[0].count", "jobs[0].count must be an integer"},
		{"not an object", `[1]`, &spec{}, specWhere, "", "request body must be a JSON object"},
		{"malformed", `{"type":`, &spec{}, specWhere, "", "malformed JSON: unexpected end of input"},
		{"syntax", `{"type" "a"}`, &spec{}, specWhere, "", "malformed JSON at byte 9: invalid character '\"' after object key"},
		{"trailing", `{"type":"a"} {}`, &spec{}, specWhere, "", "unexpected data after the JSON value"},
		{"empty", ``, &spec{}, specWhere, "", "request body is empty: send a JSON object"},
		{"empty under a prefix", ``, &spec{}, Where{Prefix: "jobs[2]"}, "jobs[2]", "jobs[2] must be a JSON object"},
		{"a time that does not parse", `{"run_at":"tomorrow"}`, &spec{}, specWhere, "run_at", "run_at must be an RFC 3339 time such as 2026-11-22T10:00:00Z"},
		{"a time, no time field named", `{"run_at":"tomorrow"}`, &spec{}, Where{}, "", "times must be RFC 3339, such as 2026-11-22T10:00:00Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := Decode([]byte(c.doc), c.into, Strict)
			if err == nil {
				t.Fatalf("Decode(%s) accepted it", c.doc)
			}
			field, msg := Explain(err, []byte(c.doc), c.where)
			if field != c.field || msg != c.msg {
				t.Errorf("Explain(%v) = %q, %q; want %q, %q", err, field, msg, c.field, c.msg)
			}
		})
	}
}

func TestDecodeModes(t *testing.T) {
	t.Parallel()
	doc := []byte(`{"type":"a","extra":1}`)
	var s spec
	if err := Decode(doc, &s, 0); err != nil || s.Type != "a" {
		t.Fatalf("without Strict: %+v, %v; want the known member read and the unknown one ignored", s, err)
	}
	if err := Decode(doc, &spec{}, Strict); err == nil {
		t.Fatal("Strict accepted an unknown member")
	}
	var m map[string]any
	if err := Decode([]byte(`{"n":9007199254740993}`), &m, Numbers); err != nil {
		t.Fatal(err)
	}
	if n, ok := m["n"].(json.Number); !ok || n.String() != "9007199254740993" {
		t.Errorf("Numbers: %T %v; want the json.Number 9007199254740993", m["n"], m["n"])
	}
	if err := Decode([]byte(`{} x`), &m, 0); !errors.Is(err, ErrTrailing) {
		t.Errorf("trailing data: %v; want ErrTrailing", err)
	}
}

// FuzzExplain: whatever a client sends, Decode either reads it or Explain
// words the error, and a message that blames a member names it (quoted
// where it holds what JSON escapes).
func FuzzExplain(f *testing.F) {
	for _, s := range []string{`{"type":"a"}`, `{"id":"x","job":{"backoff":{"zz":1}}}`, `{"job":{"type":5}}`, `[`, `{} {}`, ``, `{"run_at":"x"}`, `{"job":null}`} {
		f.Add([]byte(s))
	}
	where := Where{Nested: []string{"job", "job.backoff"}, TimeField: "run_at"}
	f.Fuzz(func(t *testing.T, data []byte) {
		var w wrapper
		err := Decode(data, &w, Strict|Numbers)
		if err == nil {
			return
		}
		field, msg := Explain(err, data, where)
		if msg == "" {
			t.Fatalf("no message for %q (%v)", data, err)
		}
		if field != "" && !strings.Contains(msg, field) && !strings.Contains(msg, strconv.Quote(field)) {
			t.Fatalf("the message %q does not name the field %q", msg, field)
		}
	})
}
