package schedule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
)

// applyPatch applies the JSON merge patch (RFC 7396) patch to the
// definition cur and decodes the result strictly. Errors are *FieldError.
func applyPatch(cur *record, patch []byte) (*Schedule, error) {
	var p map[string]any
	if err := decodeJSON(patch, &p, false); err != nil || p == nil {
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
	if err := decodeJSON(base, &doc, false); err != nil {
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
	if err := decodeJSON(data, &s, true); err != nil {
		return nil, decodeError(err, data)
	}
	return &s, nil
}

func decodeJSON(data []byte, v any, strict bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errTrailing
	}
	return nil
}

var errTrailing = errors.New("unexpected data after the JSON value")

// decodeError turns a decoding error of data into a *FieldError.
func decodeError(err error, data []byte) error {
	var typ *json.UnmarshalTypeError
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &typ) && typ.Field != "":
		return fieldErr(typ.Field, "must be %s", kindOf(typ.Type))
	case errors.As(err, &typ):
		return bodyErr("the body must be a JSON object")
	case errors.As(err, &syntax):
		return bodyErr("malformed JSON at byte %d", syntax.Offset)
	case errors.Is(err, errTrailing):
		return bodyErr("%v", err)
	}
	if rest, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name := strings.Trim(rest, `"`)
		return fieldErr(locate(data, name), "unknown field")
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return bodyErr("malformed JSON: unexpected end of input")
	}
	if strings.Contains(err.Error(), "Time") {
		return bodyErr("times must be RFC 3339, such as 2026-11-22T10:00:00Z")
	}
	return bodyErr("the body is not valid: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// bodyErr is a validation error of the body as a whole: no one field.
func bodyErr(format string, args ...any) *FieldError {
	return &FieldError{Message: fmt.Sprintf(format, args...)}
}

// kindOf names the JSON kind of Go type t, for "must be an integer".
func kindOf(t reflect.Type) string {
	if t == nil {
		return "of another type"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return kindOf(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "of another type"
}

// locate returns the path of an unknown field: top level, or inside job or
// job.backoff.
func locate(data []byte, name string) string {
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return name
	}
	if _, ok := top[name]; ok {
		return name
	}
	var j map[string]json.RawMessage
	if json.Unmarshal(top["job"], &j) == nil {
		if _, ok := j[name]; ok {
			return "job." + name
		}
		var b map[string]json.RawMessage
		if json.Unmarshal(j["backoff"], &b) == nil {
			if _, ok := b[name]; ok {
				return "job.backoff." + name
			}
		}
	}
	return name
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
