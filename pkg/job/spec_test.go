package job

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// Build refuses a payload that is not JSON; BuildDecoded, for specs a JSON
// decoder filled in, builds the same job as Build without that check.
func TestBuildChecksThePayloadAndBuildDecodedTheSameJob(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	bad := Spec{Type: "t", Payload: json.RawMessage(`{"a":`)}
	var fe *FieldError
	if _, err := bad.Build(now); !errors.As(err, &fe) || fe.Field != "payload" {
		t.Fatalf("Build of a payload that is not JSON: %v, want a payload field error", err)
	}
	for _, s := range []Spec{
		{Type: "t", Payload: json.RawMessage(`{"to":"a@example.com","n":[1,2,3]}`)},
		{Type: "t", Queue: "mail", Priority: High, MaxAttempts: ptr(5), DelaySeconds: ptr(3.5), Group: "g"},
		{Type: "t:x"},
	} {
		a, errA := s.Build(now)
		b, errB := s.BuildDecoded(now)
		if errA != nil || errB != nil {
			t.Fatalf("%+v: %v, %v", s, errA, errB)
		}
		b.ID = a.ID
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			t.Fatalf("Build %s\nBuildDecoded %s", ja, jb)
		}
	}
	// The other checks still run.
	if _, err := (&Spec{Type: "bad type"}).BuildDecoded(now); !errors.As(err, &fe) || fe.Field != "type" {
		t.Fatalf("BuildDecoded of a bad type: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// BenchmarkBuild is one job with a 2 KB payload: Build checks the payload
// again, BuildDecoded trusts the decoder that read it.
func BenchmarkBuild(b *testing.B) {
	payload := json.RawMessage(`{"body":"` + strings.Repeat("x", 2000) + `","n":[1,2,3]}`)
	now := time.Now()
	s := Spec{Type: "email.send", Payload: payload}
	b.Run("checked", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Build(now); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decoded", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.BuildDecoded(now); err != nil {
				b.Fatal(err)
			}
		}
	})
}
