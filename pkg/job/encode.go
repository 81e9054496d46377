package job

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"
)

// The JSON of a job, written without reflection: the API answers a batch
// submit with every job it created, and encoding/json's reflection was a
// fifth of the API's CPU there. The bytes are exactly what encoding/json
// writes for the same fields (TestAppendJSONMatchesEncodingJSON compares
// them over random jobs): field order, omitempty, HTML-safe string
// escaping, compacted raw payloads and results, float formatting.

// MarshalJSON writes j with its times in TimeLayout.
func (j Job) MarshalJSON() ([]byte, error) { return j.AppendJSON(make([]byte, 0, 384)) }

// MarshalJSON writes p with its time in TimeLayout.
func (p Progress) MarshalJSON() ([]byte, error) { return p.appendJSON(make([]byte, 0, 96)), nil }

// AppendJSON appends j's JSON (the bytes MarshalJSON returns) to b.
func (j *Job) AppendJSON(b []byte) ([]byte, error) {
	var err error
	b = appendKey(b, '{', "id")
	b = appendString(b, j.ID)
	b = appendKey(b, ',', "queue")
	b = appendString(b, j.Queue)
	b = appendKey(b, ',', "type")
	b = appendString(b, j.Type)
	if len(j.Payload) > 0 {
		b = appendKey(b, ',', "payload")
		if b, err = appendRaw(b, j.Payload); err != nil {
			return nil, err
		}
	}
	b = appendKey(b, ',', "priority")
	b = appendString(b, string(j.Priority))
	b = appendKey(b, ',', "state")
	b = appendString(b, string(j.State))
	b = appendKey(b, ',', "attempt")
	b = strconv.AppendInt(b, int64(j.Attempt), 10)
	b = appendKey(b, ',', "max_attempts")
	b = strconv.AppendInt(b, int64(j.MaxAttempts), 10)
	b = appendKey(b, ',', "timeout_seconds")
	b = strconv.AppendInt(b, int64(j.TimeoutSeconds), 10)
	b = appendKey(b, ',', "backoff")
	b = appendKey(b, '{', "base_seconds")
	if b, err = appendFloat(b, j.Backoff.BaseSeconds); err != nil {
		return nil, err
	}
	b = appendKey(b, ',', "max_seconds")
	if b, err = appendFloat(b, j.Backoff.MaxSeconds); err != nil {
		return nil, err
	}
	b = append(b, '}')
	if len(j.DependsOn) > 0 {
		b = appendKey(b, ',', "depends_on")
		for i, d := range j.DependsOn {
			b = append(b, "[,"[min(i, 1)])
			b = appendString(b, d)
		}
		b = append(b, ']')
	}
	b = appendOptString(b, "on_dependency_failure", j.OnDependencyFailure)
	b = appendOptString(b, "idempotency_key", j.IdempotencyKey)
	b = appendOptString(b, "group", j.Group)
	b = appendOptString(b, "traceparent", j.Traceparent)
	b = appendOptString(b, "batch", j.Batch)
	b = appendOptString(b, "worker_id", j.WorkerID)
	if len(j.Result) > 0 {
		b = appendKey(b, ',', "result")
		if b, err = appendRaw(b, j.Result); err != nil {
			return nil, err
		}
	}
	b = appendOptString(b, "last_error", j.LastError)
	if j.Progress != nil {
		b = appendKey(b, ',', "progress")
		b = j.Progress.appendJSON(b)
	}
	b = appendOptString(b, "throttled_by", j.ThrottledBy)
	if j.HeldBack != nil {
		b = appendKey(b, ',', "held_back")
		b = appendKey(b, '{', "reason")
		b = appendString(b, j.HeldBack.Reason)
		b = appendKey(b, ',', "message")
		b = appendString(b, j.HeldBack.Message)
		b = append(b, '}')
	}
	if j.Durable != nil {
		// Rare (durable jobs only): encoding/json writes it.
		d, err := json.Marshal(j.Durable)
		if err != nil {
			return nil, err
		}
		b = append(appendKey(b, ',', "durable"), d...)
	}
	b = appendOptString(b, "debounce_key", j.DebounceKey)
	if j.Debounced {
		b = append(appendKey(b, ',', "debounced"), "true"...)
	}
	if j.Sequence != nil {
		b = appendKey(b, ',', "sequence")
		b = appendKey(b, '{', "key")
		b = appendString(b, j.Sequence.Key)
		b = appendOptString(b, "on_failure", j.Sequence.OnFailure)
		b = append(b, '}')
	}
	if len(j.Tags) > 0 {
		b = appendKey(b, ',', "tags")
		for i, t := range j.Tags {
			b = append(b, "[,"[min(i, 1)])
			b = appendString(b, t)
		}
		b = append(b, ']')
	}
	if j.Logs != nil {
		b = appendKey(b, ',', "logs")
		b = appendKey(b, '{', "lines")
		b = strconv.AppendInt(b, j.Logs.Lines, 10)
		b = appendKey(b, ',', "dropped")
		b = strconv.AppendInt(b, j.Logs.Dropped, 10)
		b = append(b, '}')
	}
	b = appendKey(b, ',', "run_at")
	b = appendTime(b, j.RunAt)
	b = appendKey(b, ',', "created_at")
	b = appendTime(b, j.CreatedAt)
	if j.StartedAt != nil {
		b = appendKey(b, ',', "started_at")
		b = appendTime(b, *j.StartedAt)
	}
	if j.FinishedAt != nil {
		b = appendKey(b, ',', "finished_at")
		b = appendTime(b, *j.FinishedAt)
	}
	if j.StartBy != nil {
		b = appendKey(b, ',', "start_by")
		b = appendTime(b, *j.StartBy)
	}
	if j.Deadline != nil {
		b = appendKey(b, ',', "deadline")
		b = appendTime(b, *j.Deadline)
	}
	return append(b, '}'), nil
}

func (p *Progress) appendJSON(b []byte) []byte {
	b = appendKey(b, '{', "percent")
	b = strconv.AppendInt(b, int64(p.Percent), 10)
	b = appendOptString(b, "message", p.Message)
	b = appendKey(b, ',', "at")
	b = appendTime(b, p.At)
	return append(b, '}')
}

// appendKey appends sep and "key": (keys are plain ASCII).
func appendKey(b []byte, sep byte, key string) []byte {
	b = append(b, sep, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

// appendOptString appends ,"key":s unless s is empty (omitempty).
func appendOptString(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(appendKey(b, ',', key), s)
}

// appendString appends s as a JSON string. Plain printable ASCII (ids,
// types, states: nearly every string of a job) is copied; anything else
// goes through encoding/json, whose escaping is the reference.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendRaw appends raw JSON as encoding/json writes a json.RawMessage:
// validated, compacted and HTML-escaped. Compact JSON without <, >, & or
// non-ASCII bytes (the usual payload) is copied once validated.
func appendRaw(b []byte, raw []byte) ([]byte, error) {
	plain := true
	for _, c := range raw {
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '<' || c == '>' || c == '&' || c > 0x7e {
			plain = false
			break
		}
	}
	if plain && json.Valid(raw) {
		return append(b, raw...), nil
	}
	out, err := json.Marshal(json.RawMessage(raw))
	if err != nil {
		return nil, err
	}
	return append(b, out...), nil
}

var errNonFinite = errors.New("json: unsupported value: a non-finite backoff")

// appendFloat appends f as encoding/json writes a float64.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, errNonFinite
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 → e-9, as encoding/json writes it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

// appendTime appends t in TimeLayout, quoted (what Time.MarshalJSON writes).
// Years 0 to 9999 are written digit by digit, the same bytes as
// time.Time.AppendFormat at about a fifth of its cost (a job answer holds
// two times or more; TestAppendTimeMatchesAppendFormat compares them);
// other years go through AppendFormat.
func appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		b = append(b, '"')
		b = t.AppendFormat(b, TimeLayout)
		return append(b, '"')
	}
	hour, minute, sec := t.Clock()
	ms := t.Nanosecond() / 1e6 // ".000" truncates, as here
	return append(b, '"',
		byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+int(month)/10), byte('0'+int(month)%10), '-', byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':', byte('0'+minute/10), byte('0'+minute%10), ':',
		byte('0'+sec/10), byte('0'+sec%10), '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10),
		'Z', '"')
}
