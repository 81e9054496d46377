package envelope_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sundialhq/sundial/pkg/envelope"
)

func newKey(t testing.TB) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

func mustParse(t testing.TB, s, primary string) *envelope.Keyring {
	t.Helper()
	k, err := envelope.Parse(s, primary)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

const marker = "MARKER-7f3a-do-not-leak"

func TestRoundTrip(t *testing.T) {
	k1 := newKey(t)
	kr := mustParse(t, "k1:"+k1, "")
	plain := []byte(`{"ssn":"` + marker + `","n":1}`)
	v, err := kr.Seal(envelope.Payload, plain)
	if err != nil {
		t.Fatal(err)
	}
	if !envelope.IsEncrypted(v) || envelope.IsEncrypted(plain) {
		t.Fatalf("IsEncrypted: sealed %v, plain %v", envelope.IsEncrypted(v), envelope.IsEncrypted(plain))
	}
	if bytes.Contains(v, []byte(marker)) || bytes.Contains(v, []byte("ssn")) || strings.Contains(string(v), k1) {
		t.Fatalf("the encoded value shows its plaintext or its key: %s", v)
	}
	if id, ok := envelope.KeyID(v); !ok || id != "k1" {
		t.Fatalf("KeyID = %q, %v", id, ok)
	}
	var shape map[string]map[string]any
	if err := json.Unmarshal(v, &shape); err != nil || len(shape) != 1 || len(shape[envelope.Field]) != 5 || shape[envelope.Field]["v"] != 1.0 {
		t.Fatalf("shape: %s (%v)", v, err)
	}
	got, err := kr.Open(envelope.Payload, v)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %s, %v", got, err)
	}
	// Two seals of one value differ (fresh data key and nonces).
	v2, _ := kr.Seal(envelope.Payload, plain)
	if bytes.Equal(v, v2) {
		t.Fatal("two seals are equal")
	}
	// A payload does not open as a result: what is bound in.
	var oe *envelope.OpenError
	if _, err := kr.Open(envelope.Result, v); !errors.As(err, &oe) || oe.KeyID != "k1" {
		t.Fatalf("payload opened as a result: %v", err)
	}
}

func TestText(t *testing.T) {
	kr := mustParse(t, "k1:"+newKey(t), "")
	s, err := kr.SealText(envelope.Error, "card "+marker+" declined")
	if err != nil {
		t.Fatal(err)
	}
	if !envelope.IsEncryptedText(s) || strings.Contains(s, marker) {
		t.Fatalf("sealed text %q", s)
	}
	if id, ok := envelope.TextKeyID("timeout after 3s: " + s); !ok || id != "k1" {
		t.Fatalf("TextKeyID = %q %v", id, ok)
	}
	got, err := kr.OpenText(envelope.Error, "timeout after 3s: "+s)
	if err != nil || got != "timeout after 3s: card "+marker+" declined" {
		t.Fatalf("OpenText = %q, %v", got, err)
	}
	if got, err := kr.OpenText(envelope.Error, "plain error"); err != nil || got != "plain error" {
		t.Fatalf("plain text: %q, %v", got, err)
	}
}

func TestRotation(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	old := mustParse(t, "k1:"+k1, "")
	v, err := old.Seal(envelope.Payload, []byte(`"`+marker+`"`))
	if err != nil {
		t.Fatal(err)
	}
	// Rotated: k2 added as the last entry (so primary), k1 kept.
	rotated := mustParse(t, "k1:"+k1+",k2:"+k2, "")
	if rotated.Primary() != "k2" {
		t.Fatalf("primary = %q, want the last entry", rotated.Primary())
	}
	if got, err := rotated.Open(envelope.Payload, v); err != nil || string(got) != `"`+marker+`"` {
		t.Fatalf("old value under the rotated ring: %s, %v", got, err)
	}
	nv, _ := rotated.Seal(envelope.Payload, []byte(`1`))
	if id, _ := envelope.KeyID(nv); id != "k2" {
		t.Fatalf("new value sealed under %q, want k2", id)
	}
	// The old ring cannot read what the new primary sealed.
	var mk *envelope.MissingKeyError
	if _, err := old.Open(envelope.Payload, nv); !errors.As(err, &mk) || mk.KeyID != "k2" {
		t.Fatalf("old ring on a k2 value: %v", err)
	}
	if want := `payload encrypted with key "k2", which this keyring lacks`; mk.Error() != want {
		t.Fatalf("error %q, want %q", mk.Error(), want)
	}
	// An explicit primary wins over the order.
	if p := mustParse(t, "k1:"+k1+"\nk2:"+k2+"\n", "k1").Primary(); p != "k1" {
		t.Fatalf("primary = %q", p)
	}
}

func TestWrongOrMissingKey(t *testing.T) {
	v, _ := mustParse(t, "k1:"+newKey(t), "").Seal(envelope.Payload, []byte(`{}`))
	// Same id, another key: does not decrypt, names the id only.
	other := mustParse(t, "k1:"+newKey(t), "")
	var oe *envelope.OpenError
	if _, err := other.Open(envelope.Payload, v); !errors.As(err, &oe) || oe.KeyID != "k1" {
		t.Fatalf("wrong key: %v", err)
	}
	var nilRing *envelope.Keyring
	var mk *envelope.MissingKeyError
	if _, err := nilRing.Open(envelope.Payload, v); !errors.As(err, &mk) || mk.KeyID != "k1" {
		t.Fatalf("no keyring: %v", err)
	}
	if _, err := nilRing.Seal(envelope.Payload, []byte(`1`)); err == nil {
		t.Fatal("a nil keyring sealed")
	}
}

func TestTamper(t *testing.T) {
	kr := mustParse(t, "k1:"+newKey(t)+",k2:"+newKey(t), "k1")
	v, _ := kr.Seal(envelope.Payload, []byte(`{"a":"`+marker+`"}`))
	var x map[string]map[string]any
	if err := json.Unmarshal(v, &x); err != nil {
		t.Fatal(err)
	}
	flip := func(field string) []byte {
		y := map[string]map[string]any{envelope.Field: {}}
		for k, val := range x[envelope.Field] {
			y[envelope.Field][k] = val
		}
		b, _ := base64.StdEncoding.DecodeString(y[envelope.Field][field].(string))
		b[len(b)-1] ^= 1
		y[envelope.Field][field] = base64.StdEncoding.EncodeToString(b)
		out, _ := json.Marshal(y)
		return out
	}
	relabel := func(kid string) []byte {
		s := strings.Replace(string(v), `"kid":"k1"`, `"kid":"`+kid+`"`, 1)
		return []byte(s)
	}
	for name, bad := range map[string][]byte{
		"ct": flip("ct"), "iv": flip("iv"), "dek": flip("dek"),
		"kid relabelled":  relabel("k2"),
		"truncated":       v[:len(v)-10],
		"extra field":     []byte(strings.Replace(string(v), `"v":1`, `"v":1,"x":1`, 1)),
		"version 2":       []byte(strings.Replace(string(v), `"v":1`, `"v":2`, 1)),
		"invalid kid":     relabel("k 1"),
		"not an envelope": []byte(`{"a":1}`),
	} {
		var oe *envelope.OpenError
		if _, err := kr.Open(envelope.Payload, bad); !errors.As(err, &oe) {
			t.Errorf("%s: Open error %v, want an OpenError", name, err)
		}
	}
}

func TestIsEncrypted(t *testing.T) {
	for v, want := range map[string]bool{
		`{"$sundial_enc":{}}`: true, ` { "$sundial_enc" : 1}`: true,
		`{"a":{"$sundial_enc":1}}`: false, `"$sundial_enc"`: false, ``: false, `[{"$sundial_enc":1}]`: false,
	} {
		if got := envelope.IsEncrypted([]byte(v)); got != want {
			t.Errorf("IsEncrypted(%s) = %v", v, got)
		}
	}
}

func TestParse(t *testing.T) {
	k := newKey(t)
	for _, tc := range []struct{ s, primary, err string }{
		{s: "", err: "no key"},
		{s: "k1", err: "entry 1"},
		{s: "k 1:" + k, err: "entry 1"},
		{s: strings.Repeat("a", 65) + ":" + k, err: "entry 1"},
		{s: "k1:short", err: `"k1": want the standard base64 of 32 bytes`},
		{s: "k1:" + k + ",k1:" + k, err: "listed twice"},
		{s: "k1:" + k, primary: "k9", err: `primary "k9"`},
		{s: "# comment\nk1:" + k + "\n\nk_2.x-Y:" + k + "\n"},
	} {
		_, err := envelope.Parse(tc.s, tc.primary)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Parse(%.20q, %q) = %v, want %q", tc.s, tc.primary, err, tc.err)
		}
		if err != nil && strings.Contains(err.Error(), k) {
			t.Errorf("error shows key material: %v", err)
		}
	}
	kr := mustParse(t, "k1:"+k, "")
	for _, s := range []string{kr.String(), fmt.Sprintf("%v %+v %#v", kr, kr, kr)} {
		if strings.Contains(s, k) || !strings.Contains(s, "k1") {
			t.Errorf("printed keyring %q", s)
		}
	}
}

func TestFromEnv(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	file := filepath.Join(t.TempDir(), "keyring")
	if err := os.WriteFile(file, []byte("k1:"+k1+"\nk2:"+k2+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if kr, err := envelope.FromEnv(env(nil)); kr != nil || err != nil {
		t.Fatalf("unset: %v, %v", kr, err)
	}
	kr, err := envelope.FromEnv(env(map[string]string{"SUNDIAL_KEYRING_FILE": file, "SUNDIAL_KEYRING_PRIMARY": "k1"}))
	if err != nil || kr.Primary() != "k1" || !kr.Has("k2") {
		t.Fatalf("file: %v, %v", kr, err)
	}
	kr, err = envelope.FromEnv(env(map[string]string{"SUNDIAL_KEYRING": "k1:" + k1 + ",k2:" + k2}))
	if err != nil || kr.Primary() != "k2" {
		t.Fatalf("env: %v, %v", kr, err)
	}
	for _, m := range []map[string]string{
		{"SUNDIAL_KEYRING": "k1:" + k1, "SUNDIAL_KEYRING_FILE": file},
		{"SUNDIAL_KEYRING_PRIMARY": "k1"},
		{"SUNDIAL_KEYRING_FILE": file + ".missing"},
		{"SUNDIAL_KEYRING": "k1:x"},
	} {
		if _, err := envelope.FromEnv(env(m)); err == nil {
			t.Errorf("FromEnv(%v) accepted", m)
		}
	}
}

func FuzzOpen(f *testing.F) {
	kr, _ := envelope.Parse("k1:"+base64.StdEncoding.EncodeToString(make([]byte, 32)), "")
	v, _ := kr.Seal(envelope.Payload, []byte(`{"a":1}`))
	f.Add(v)
	f.Add([]byte(`{"$sundial_enc":{"v":1,"kid":"k1","dek":"","iv":"","ct":""}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := kr.Open(envelope.Payload, b); err != nil {
			var mk *envelope.MissingKeyError
			var oe *envelope.OpenError
			if !errors.As(err, &mk) && !errors.As(err, &oe) {
				t.Fatalf("untyped error %v", err)
			}
		}
	})
}

func BenchmarkSeal(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			kr := mustParse(b, "k1:"+newKey(b), "")
			pt := bytes.Repeat([]byte("a"), size)
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := kr.Seal(envelope.Payload, pt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkOpen(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			kr := mustParse(b, "k1:"+newKey(b), "")
			v, _ := kr.Seal(envelope.Payload, bytes.Repeat([]byte("a"), size))
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := kr.Open(envelope.Payload, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkIsEncrypted(b *testing.B) {
	p := []byte(`{"to":"someone@example.com","subject":"hello"}`)
	for b.Loop() {
		envelope.IsEncrypted(p)
	}
}
