package job

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// refJob mirrors Job field for field (TestRefJobMirrorsJob keeps it so),
// with a Progress whose JSON encoding/json writes by reflection.
type refJob struct {
	ID                  string          `json:"id"`
	Queue               string          `json:"queue"`
	Type                string          `json:"type"`
	Payload             json.RawMessage `json:"payload,omitempty"`
	Priority            Priority        `json:"priority"`
	State               State           `json:"state"`
	Attempt             int             `json:"attempt"`
	MaxAttempts         int             `json:"max_attempts"`
	TimeoutSeconds      int             `json:"timeout_seconds"`
	Backoff             Backoff         `json:"backoff"`
	RunAt               time.Time       `json:"run_at"`
	DependsOn           []string        `json:"depends_on,omitempty"`
	OnDependencyFailure string          `json:"on_dependency_failure,omitempty"`
	IdempotencyKey      string          `json:"idempotency_key,omitempty"`
	Group               string          `json:"group,omitempty"`
	Traceparent         string          `json:"traceparent,omitempty"`
	Batch               string          `json:"batch,omitempty"`
	CreatedAt           time.Time       `json:"created_at"`
	StartedAt           *time.Time      `json:"started_at,omitempty"`
	FinishedAt          *time.Time      `json:"finished_at,omitempty"`
	WorkerID            string          `json:"worker_id,omitempty"`
	Result              json.RawMessage `json:"result,omitempty"`
	LastError           string          `json:"last_error,omitempty"`
	Progress            *refProgress    `json:"progress,omitempty"`
	ThrottledBy         string          `json:"throttled_by,omitempty"`
	HeldBack            *HeldBack       `json:"held_back,omitempty"`
	Durable             *Durable        `json:"durable,omitempty"`
	StartBy             *time.Time      `json:"start_by,omitempty"`
	Deadline            *time.Time      `json:"deadline,omitempty"`
	Debounce            *Debounce       `json:"-"`
	DebounceKey         string          `json:"debounce_key,omitempty"`
	Debounced           bool            `json:"debounced,omitempty"`
	Sequence            *Sequence       `json:"sequence,omitempty"`
	Tags                []string        `json:"tags,omitempty"`
	Logs                *LogCounts      `json:"logs,omitempty"`
}

type refProgress Progress

func (p refProgress) MarshalJSON() ([]byte, error) {
	type plain refProgress
	return json.Marshal(struct {
		plain
		At Time `json:"at"`
	}{plain(p), Time(p.At)})
}

// referenceJSON is what encoding/json writes for j, with the times in
// TimeLayout (the encoder before AppendJSON): the oracle.
func referenceJSON(j Job) ([]byte, error) {
	r := refJob{j.ID, j.Queue, j.Type, j.Payload, j.Priority, j.State, j.Attempt, j.MaxAttempts, j.TimeoutSeconds,
		j.Backoff, j.RunAt, j.DependsOn, j.OnDependencyFailure, j.IdempotencyKey, j.Group, j.Traceparent, j.Batch, j.CreatedAt, j.StartedAt,
		j.FinishedAt, j.WorkerID, j.Result, j.LastError, (*refProgress)(j.Progress), j.ThrottledBy, j.HeldBack, j.Durable,
		j.StartBy, j.Deadline, j.Debounce, j.DebounceKey, j.Debounced, j.Sequence, j.Tags, j.Logs}
	type plain refJob
	return json.Marshal(struct {
		plain
		RunAt      Time  `json:"run_at"`
		CreatedAt  Time  `json:"created_at"`
		StartedAt  *Time `json:"started_at,omitempty"`
		FinishedAt *Time `json:"finished_at,omitempty"`
		StartBy    *Time `json:"start_by,omitempty"`
		Deadline   *Time `json:"deadline,omitempty"`
	}{plain(r), Time(j.RunAt), Time(j.CreatedAt), TimePtr(j.StartedAt), TimePtr(j.FinishedAt), TimePtr(j.StartBy), TimePtr(j.Deadline)})
}

// A field added to Job must be added to refJob (and to AppendJSON, or the
// comparison below fails).
func TestRefJobMirrorsJob(t *testing.T) {
	a, b := reflect.TypeFor[Job](), reflect.TypeFor[refJob]()
	if a.NumField() != b.NumField() {
		t.Fatalf("Job has %d fields, refJob %d", a.NumField(), b.NumField())
	}
	for i := range a.NumField() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || fa.Tag != fb.Tag || (fa.Type != fb.Type && fa.Name != "Progress") {
			t.Fatalf("field %d: Job has %s %s %q, refJob %s %s %q", i, fa.Name, fa.Type, fa.Tag, fb.Name, fb.Type, fb.Tag)
		}
	}
}

var tricky = []string{
	"", "a", "01M85QMDQET975DCA78NXC8VSV", "email.send", "with space", `quote"back\slash`,
	"<script>&</script>", "tab\tnew\nline\r", "\x00\x01\x1f\x7f", "héllo wörld", "日本語",
	"\u2028\u2029", "bad\xffutf8\xc3", "emoji 🎉",
}

var payloads = []string{
	`{}`, `{"t":1}`, `{"a": [1, 2, {"b": null}]}`, "{\n  \"x\": \"<&>\"\n}", `"just a string"`, `123.5e10`,
	`{"u":"\u2028 é"}`, `[true,false,null]`, `{"k":"日本"}`,
}

func randomJob(r *rand.Rand) Job {
	pick := func(list []string) string { return list[r.IntN(len(list))] }
	t := time.UnixMilli(r.Int64N(4e12)).UTC()
	j := Job{
		ID: pick(tricky), Queue: pick(tricky), Type: pick(tricky),
		Priority: Priority(pick(tricky)), State: State(pick(tricky)),
		Attempt: r.IntN(200) - 100, MaxAttempts: r.IntN(100), TimeoutSeconds: r.IntN(1 << 20),
		Backoff:        Backoff{BaseSeconds: []float64{0, 5, 0.5, 1e-7, 3e21, 123456.789, -2, 1e20, 1e-6}[r.IntN(9)], MaxSeconds: r.Float64() * math.Pow(10, float64(r.IntN(30)-8))},
		RunAt:          t,
		CreatedAt:      t.Add(-time.Duration(r.IntN(1e6)) * time.Millisecond),
		IdempotencyKey: pick(tricky), Group: pick(tricky), Traceparent: pick(tricky),
		WorkerID: pick(tricky), LastError: pick(tricky), ThrottledBy: pick(tricky),
		OnDependencyFailure: pick(tricky),
	}
	if r.IntN(2) == 0 {
		j.HeldBack = &HeldBack{Reason: pick(tricky), Message: pick(tricky)}
	}
	if r.IntN(4) == 0 {
		end := Time(t)
		j.Durable = &Durable{SignalKey: pick(tricky),
			Steps:   []Step{{Seq: 1, Name: pick(tricky), Status: StepOK, StartedAt: Time(t), EndedAt: &end, Result: json.RawMessage(pick(payloads))}},
			Signals: []Signal{{Name: pick(tricky), At: Time(t), Value: json.RawMessage(pick(payloads))}}}
	}
	if r.IntN(3) > 0 {
		j.Payload = json.RawMessage(pick(payloads))
	}
	if r.IntN(3) == 0 {
		j.Result = json.RawMessage(pick(payloads))
	}
	for range r.IntN(3) {
		j.DependsOn = append(j.DependsOn, pick(tricky))
	}
	if r.IntN(2) == 0 {
		s := t.Add(time.Second)
		j.StartedAt = &s
	}
	if r.IntN(2) == 0 {
		f := t.Add(time.Minute)
		j.FinishedAt = &f
	}
	if r.IntN(2) == 0 {
		j.Progress = &Progress{Percent: r.IntN(101), Message: pick(tricky), At: t}
	}
	if r.IntN(3) == 0 {
		s, d := t.Add(time.Hour), t.Add(2*time.Hour)
		j.StartBy, j.Deadline = &s, &d
		j.DebounceKey, j.Debounced = pick(tricky), r.IntN(2) == 0
		j.Sequence = &Sequence{Key: pick(tricky), OnFailure: pick(tricky)}
		j.Tags = []string{pick(tricky), pick(tricky)}
		j.Logs = &LogCounts{Lines: r.Int64N(1000), Dropped: r.Int64N(10)}
	}
	return j
}

// AppendJSON writes what encoding/json writes for the same job, over random
// jobs with every optional field present or not, strings that need
// escaping (HTML, control bytes, invalid UTF-8, U+2028), raw payloads that
// need compacting, and floats of every magnitude.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		j := randomJob(r)
		got, err := j.MarshalJSON()
		if err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		want, err := referenceJSON(j)
		if err != nil {
			t.Fatalf("reference %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("job %d:\n got %s\nwant %s", i, got, want)
		}
		if !json.Valid(got) {
			t.Fatalf("job %d: invalid JSON %s", i, got)
		}
	}
}

// A payload that is not JSON (it never gets past validation, but a hash
// edited by hand could hold one) and a non-finite backoff are errors, as
// with encoding/json, not invalid answers.
func TestAppendJSONRefusesWhatEncodingJSONRefuses(t *testing.T) {
	if _, err := (Job{Payload: json.RawMessage(`{"a":`)}).MarshalJSON(); err == nil {
		t.Fatal("a truncated payload was written")
	}
	if _, err := (Job{Backoff: Backoff{BaseSeconds: math.Inf(1)}}).MarshalJSON(); err == nil {
		t.Fatal("an infinite backoff was written")
	}
}
