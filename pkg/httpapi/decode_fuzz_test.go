package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/jsonbody"
	"github.com/sundialhq/sundial/pkg/job"
)

// FuzzDecodeSubmit checks that the submit decoder never panics, that every
// refusal is a 400 in the API's shape, and that every accepted body builds
// a valid job or is refused by validation naming a field.
func FuzzDecodeSubmit(f *testing.F) {
	for _, s := range []string{
		`{"type":"email.send"}`,
		`{"queue":"mail","type":"a","payload":{"x":[1,2,{"y":null}]},"priority":"high","max_attempts":5,"timeout_seconds":60}`,
		`{"type":"a","backoff":{"base_seconds":0.5,"max_seconds":10},"delay_seconds":1.5}`,
		`{"type":"a","run_at":"2026-11-23T11:00:00.123+01:00","depends_on":["01JD0000000000000000000000"],"idempotency_key":"k"}`,
		`{"type":"a","priorty":"high"}`, `{"type":"a"} x`, `[]`, `null`, `{"backoff":{"zz":1}}`, `{"max_attempts":1e400}`,
		`{"type":"a","payload":"\u0000"}`, `{"TYPE":"a","Priority":"low"}`,
	} {
		f.Add([]byte(s))
	}
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := decodeSubmit(data)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Code != codeInvalidArgument || ae.Message == "" {
				t.Fatalf("decode error %#v", err)
			}
			return
		}
		j, err := spec.Build(now)
		if err != nil {
			var fe *job.FieldError
			if !errors.As(err, &fe) || fe.Field == "" {
				t.Fatalf("build error %#v", err)
			}
			return
		}
		switch {
		case !job.ValidQueue(j.Queue), !job.ValidType(j.Type), !j.Priority.Valid(), !j.State.Valid(),
			j.MaxAttempts < 1 || j.MaxAttempts > job.MaxMaxAttempts,
			j.TimeoutSeconds < 1 || j.TimeoutSeconds > job.MaxTimeoutSeconds,
			j.Backoff.BaseSeconds < 0 || j.Backoff.MaxSeconds < j.Backoff.BaseSeconds,
			j.RunAt.Before(now) || j.RunAt.After(now.Add(job.MaxDelay)),
			len(j.Payload) > 0 && !json.Valid(j.Payload),
			len(j.DependsOn) > job.MaxDependencies, j.ID == "":
			t.Fatalf("accepted an invalid job from %q: %+v", data, j)
		}
		if _, err := json.Marshal(j); err != nil {
			t.Fatalf("the job does not encode: %v", err)
		}
	})
}

// FuzzDecodeFastAgrees checks decodeFast against jsonbody.Decode (strict), the
// decoder that decides: whatever the fast path accepts, encoding/json
// accepts too, with an identical result, for a job and for a batch.
func FuzzDecodeFastAgrees(f *testing.F) {
	for _, s := range []string{
		`{"type":"email.send"}`,
		`{"queue":"mail","type":"a","payload":{"x":[1,2,{"y":null}]},"priority":"high","max_attempts":5,"timeout_seconds":60}`,
		`{"type":"a","backoff":{"base_seconds":0.5,"max_seconds":10},"delay_seconds":1.5}`,
		`{"type":"a","run_at":"2026-11-23T11:00:00.123+01:00","depends_on":["01JD0000000000000000000000"],"idempotency_key":"k"}`,
		`{"type":"a","run_at":null,"payload":null,"depends_on":null,"backoff":null,"max_attempts":null}`,
		`{"type":"a","depends_on":[],"payload":  [ 1 , "x" ] ,"group":"g","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`,
		`{"type":"a","type":"b"}`, `{"Type":"a"}`, `{"type":"a\xff"}`, `{"type":"\u00e9\ud800"}`,
		`{"type":"a","max_attempts":1.0}`, `{"type":"a","max_attempts":1e1}`, `{"type":"a","max_attempts":-0}`,
		`{"type":"a","max_attempts":99999999999999999999}`, `{"type":"a","delay_seconds":1e400}`, `{"type":"a","delay_seconds":-0.0}`,
		`{"type":"a","run_at":"2026-11-23T24:00:00Z"}`, `{"type":"a","run_at":"2026-11-23t10:00:00z"}`, `{"type":"a","run_at":"2026-11-23T10:00:00.Z"}`,
		`{"type":"a","run_at":"2026-11-23T10:00:00+24:00"}`, `{"type":"a","run_at":1}`,
		// Times encoding/json takes and jsonv2's own parser refuses (the fast
		// path then leaves them to encoding/json) or reads alike.
		`{"type":"a","run_at":"2026-11-23T10:00:00,123Z"}`, `{"type":"a","run_at":"2026-11-23T10:00:00+01:60"}`,
		`{"type":"a","run_at":"2026-11-23T1:00:00Z"}`, `{"type":"a","run_at":"2026-11-23T10:00:00.1234567890Z"}`,
		`{"type":"a","run_at":"2026-11-23T10:00:00-00:00"}`, `{"type":"a","run_at":"0000-01-01T00:00:00Z"}`,
		`{"type":"a","run_at":"2026-11-23T10:00:00.123456789+23:59"}`, `{"type":"a","run_at":"2026-02-30T10:00:00Z"}`,
		`{"type":"a","payload":"\u0000"}`, `{"type":"a","payload":{"a":1,"a":2}}`, `{"type":"a","payload":"\xff"}`,
		`{"jobs":[{"type":"a"},{"type":"b","priority":"low"}]}`, `{"jobs":null}`, `{"jobs":[]}`, `{"jobs":[null]}`, `{"jobs":{}}`,
		`{"jobs":[{"type":"a"}],"jobs":[{"type":"b"}]}`, `{"Jobs":[{"type":"a"}]}`, ` {"type":"a"} `, `{"type":"a"} x`, `[]`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		agree(t, data, new(job.Spec), new(job.Spec))
		agree(t, data, new(batchRequest), new(batchRequest))
	})
}

// agree decodes data into fast with decodeFast and into strict with
// jsonbody.Decode, and fails when the fast path accepted what the strict one
// refuses or read it differently.
func agree[T any](t *testing.T, data []byte, fast, strict *T) {
	t.Helper()
	if !decodeFast(data, fast) {
		var zero T
		if !reflect.DeepEqual(*fast, zero) {
			t.Fatalf("a refused %q left %+v", data, *fast)
		}
		return
	}
	if err := jsonbody.Decode(data, strict, jsonbody.Strict); err != nil {
		t.Fatalf("the fast path accepted %q, encoding/json refuses it: %v", data, err)
	}
	if !reflect.DeepEqual(fast, strict) {
		t.Fatalf("%q reads differently:\nfast   %+v\nstrict %+v", data, *fast, *strict)
	}
}

// TestDecodeFastTakesWellFormedBodies: the bodies clients send go the fast
// way (a fast path that refused everything would pass the fuzz test above).
func TestDecodeFastTakesWellFormedBodies(t *testing.T) {
	for _, s := range []string{
		string(benchSpec),
		`{"type":"a","run_at":"2026-11-23T11:00:00.123+01:00","depends_on":["01JD0000000000000000000000"],"idempotency_key":"k","group":"g"}`,
		`{"type":"a","backoff":{"base_seconds":0.5,"max_seconds":10},"delay_seconds":1.5,"payload":null}`,
	} {
		if !decodeFast([]byte(s), new(job.Spec)) {
			t.Errorf("the fast path refused %s", s)
		}
		if !decodeFast([]byte(`{"jobs":[`+s+`,`+s+`]}`), new(batchRequest)) {
			t.Errorf("the fast path refused a batch of %s", s)
		}
	}
	for _, s := range []string{`{"Type":"a"}`, `{"type":"a","type":"b"}`, `{"type":"a","nope":1}`, "{\"type\":\"a\xff\"}"} {
		if decodeFast([]byte(s), new(job.Spec)) {
			t.Errorf("the fast path took %q, which encoding/json must decide", s)
		}
	}
}
