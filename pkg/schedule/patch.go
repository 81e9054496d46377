package schedule

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/sundialhq/sundial/internal/jsonbody"
)

// applyPatch applies the JSON merge patch (RFC 7396) patch to the
// definition cur and decodes the result strictly. Errors are *FieldError.
func applyPatch(cur *record, patch []byte) (*Schedule, error) {
	var p map[string]any
	if err := jsonbody.Decode(patch, &p, jsonbody.Numbers); err != nil || p == nil {
		return nil, bodyErr("a patch must be a JSON object")
	}
	if id, ok := p["id"]; ok && id != cur.ID {
		return nil, fieldErr("id", "cannot be changed; it is %q", cur.ID)
	}
	enabled := cur.Enabled
	base, err := json.Marshal(&Schedule{
		ID: cur.ID, Cron: cur.Cron, EverySeconds: cur.EverySeconds, Timezone: cur.Timezone,
		Job: cur.Job, Enabled: &enabled, Misfire: cur.Misfire,
	})
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := jsonbody.Decode(base, &doc, jsonbody.Numbers); err != nil {
		return nil, err
	}
	// Setting one kind of timing replaces the other.
	if v, ok := p["cron"]; ok && v != nil {
		if _, both := p["every_seconds"]; !both {
			delete(doc, "every_seconds")
		}
	}
	if v, ok := p["every_seconds"]; ok && v != nil {
		if _, both := p["cron"]; !both {
			delete(doc, "cron")
		}
	}
	merged, err := json.Marshal(mergePatch(doc, p))
	if err != nil {
		return nil, err
	}
	return Decode(merged)
}

// mergePatch applies patch to target as RFC 7396 describes: objects merge
// member by member, null removes a member, anything else replaces.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
		} else {
			t[k] = mergePatch(t[k], v)
		}
	}
	return t
}

// Decode decodes a schedule written by a client, rejecting unknown fields
// and trailing data. Errors are *FieldError naming the field at fault.
func Decode(data []byte) (*Schedule, error) {
	var s Schedule
	if err := jsonbody.Decode(data, &s, jsonbody.Strict|jsonbody.Numbers); err != nil {
		return nil, decodeError(err, data)
	}
	return &s, nil
}

// decodeError turns a decoding error of data into a *FieldError naming
// the member at fault (jsonbody.Explain).
func decodeError(err error, data []byte) error {
	field, msg := jsonbody.Explain(err, data, jsonbody.Where{Nested: []string{"job", "job.backoff"}})
	return &FieldError{Field: field, Message: msg}
}

// bodyErr is a validation error of the body as a whole: no one field.
func bodyErr(format string, args ...any) *FieldError {
	return &FieldError{Message: fmt.Sprintf(format, args...)}
}

// sortByID orders schedules by id.
func sortByID(s []*Schedule) {
	slices.SortFunc(s, func(a, b *Schedule) int { return strings.Compare(a.ID, b.ID) })
}

// String returns a one-line description, for logs and errors.
func (s *Schedule) String() string {
	timing := s.Cron
	if s.EverySeconds != nil {
		timing = fmt.Sprintf("every %ds", *s.EverySeconds)
	}
	return fmt.Sprintf("%s (%s %s → %s/%s)", s.ID, timing, s.Timezone, s.Job.Queue, s.Job.Type)
}
