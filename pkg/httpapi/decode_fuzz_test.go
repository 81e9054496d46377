package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

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
