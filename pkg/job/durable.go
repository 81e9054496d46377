package job

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Durable is what a durable job recorded (docs/durable.md): its steps in
// the order its handler ran them, the signals sent to it, the key it
// chose for signals, and what it waits for while parked. Nil for a job
// that recorded nothing.
type Durable struct {
	Steps     []Step    `json:"steps,omitempty"`
	Signals   []Signal  `json:"signals,omitempty"`
	SignalKey string    `json:"signal_key,omitempty"`
	Awaiting  *Awaiting `json:"awaiting,omitempty"`
}

// The statuses of a Step.
const (
	StepOK      = "ok"      // ran and returned a result
	StepErr     = "err"     // ran and failed for good (its retries spent)
	StepWait    = "wait"    // a wait (a sleep, a signal) that has begun
	StepTimeout = "timeout" // a wait for a signal whose deadline passed first
)

// Step is one recorded step of a durable job.
type Step struct {
	Seq       int             `json:"seq"`
	Name      string          `json:"name"`
	Status    string          `json:"status"`
	StartedAt Time            `json:"started_at"`
	EndedAt   *Time           `json:"ended_at,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
	// Deadline is, for a wait, when it ends without its signal (a sleep:
	// when it ends).
	Deadline *Time `json:"deadline,omitempty"`
}

// Signal is a signal sent to a durable job: a named JSON value.
type Signal struct {
	Name  string          `json:"name"`
	At    Time            `json:"at"`
	Value json.RawMessage `json:"value,omitempty"`
}

// Awaiting is what a parked durable job waits for: a sleep's end, or a
// signal (until its deadline, if it has one).
type Awaiting struct {
	Kind   string `json:"kind"` // "sleep" or "signal"
	Signal string `json:"signal,omitempty"`
	Until  Time   `json:"until"`
}

// ValidDurableName reports whether s may name a durable job's step or
// signal, or be the key a wait chose: 1 to 200 bytes without tabs or line
// breaks (the separators of the records).
func ValidDurableName(s string) bool {
	return s != "" && len(s) <= 200 && !strings.ContainsAny(s, "\t\r\n")
}

// StepRecord is a step as the engine stores it in the job's hash (field
// "st:<seq>"): "<status>\t<name>\t<start ms>\t<end ms>\t<value>", value
// the result (ok), the error (err) or the deadline in ms (wait, timeout).
func StepRecord(status, name string, start, end time.Time, value string) string {
	endMS := ""
	if !end.IsZero() {
		endMS = strconv.FormatInt(end.UnixMilli(), 10)
	}
	return status + "\t" + name + "\t" + strconv.FormatInt(start.UnixMilli(), 10) + "\t" + endMS + "\t" + value
}

// ParseStep reads a StepRecord back; ok is false for a malformed one.
func ParseStep(seq int, rec string) (s Step, ok bool) {
	parts := strings.SplitN(rec, "\t", 5)
	if len(parts) != 5 {
		return Step{}, false
	}
	s = Step{Seq: seq, Status: parts[0], Name: parts[1], StartedAt: Time(msTimeOf(parts[2]))}
	if parts[3] != "" {
		t := Time(msTimeOf(parts[3]))
		s.EndedAt = &t
	}
	switch s.Status {
	case StepOK:
		if parts[4] != "" {
			s.Result = json.RawMessage(parts[4])
		}
	case StepErr:
		s.Error = parts[4]
	case StepWait, StepTimeout:
		if parts[4] != "" {
			t := Time(msTimeOf(parts[4]))
			s.Deadline = &t
		}
	}
	return s, true
}

// ParseSignal reads a signal as the engine stores it (field "sg:<name>":
// "<idempotency key>\t<at ms>\t<value>").
func ParseSignal(name, rec string) (Signal, bool) {
	parts := strings.SplitN(rec, "\t", 3)
	if len(parts) != 3 {
		return Signal{}, false
	}
	s := Signal{Name: name, At: Time(msTimeOf(parts[1]))}
	if parts[2] != "" {
		s.Value = json.RawMessage(parts[2])
	}
	return s, true
}

func msTimeOf(s string) time.Time {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.UnixMilli(n).UTC()
}
