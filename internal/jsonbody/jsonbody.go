// Package jsonbody is the one strict JSON decoder of what clients write
// (request bodies, schedule definitions) and the one translation of its
// errors into the member at fault and a message that names it. The API's
// handlers and pkg/schedule both use it, so that a client gets the same
// words for the same mistake whichever route it called.
package jsonbody

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// ErrTrailing is Decode's error for data that holds more after the value.
var ErrTrailing = errors.New("unexpected data after the JSON value")

// Mode chooses how Decode reads.
type Mode uint8

const (
	// Strict refuses object members that v has no field for.
	Strict Mode = 1 << iota
	// Numbers decodes numbers held in interface values as json.Number
	// instead of float64 (no precision lost on the way through).
	Numbers
)

// Decode decodes exactly one JSON value from data into v, with encoding/json.
// Anything after the value is ErrTrailing. Errors are encoding/json's, for
// Explain.
func Decode(data []byte, v any, m Mode) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if m&Strict != 0 {
		dec.DisallowUnknownFields()
	}
	if m&Numbers != 0 {
		dec.UseNumber()
	}
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return ErrTrailing
	}
	return nil
}

// Where tells Explain where the decoded value sits in what the client sent,
// and where to look for a member it did not expect.
type Where struct {
	// Prefix is the path of the value inside the body ("jobs[3]"); "" when
	// the value is the body.
	Prefix string
	// Nested are the value's members that hold objects, as dotted paths
	// ("backoff", "job.backoff"), searched for an unknown member's place.
	Nested []string
	// TimeField is the member a time that does not parse is in, when the
	// value has one time a client writes ("run_at"); "" otherwise.
	TimeField string
}

// Explain describes err, an error of Decode over data, as the path of the
// member at fault ("" for the value as a whole) and a message for the
// client that names it.
func Explain(err error, data []byte, w Where) (field, msg string) {
	at := func(f string) string {
		switch {
		case w.Prefix == "":
			return f
		case f == "":
			return w.Prefix
		}
		return w.Prefix + "." + f
	}
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
		tm     *time.ParseError
	)
	switch {
	case errors.Is(err, io.EOF):
		if w.Prefix != "" {
			return w.Prefix, w.Prefix + " must be a JSON object"
		}
		return "", "request body is empty: send a JSON object"
	case errors.Is(err, ErrTrailing):
		return w.Prefix, ErrTrailing.Error()
	case errors.As(err, &syntax):
		return w.Prefix, "malformed JSON at byte " + strconv.FormatInt(syntax.Offset, 10) + ": " + strings.TrimPrefix(syntax.Error(), "json: ")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return w.Prefix, "malformed JSON: unexpected end of input"
	case errors.As(err, &typ):
		f := at(typ.Field)
		if f == "" {
			return "", "request body must be a JSON object"
		}
		return f, f + " must be " + kindName(typ.Type)
	case errors.As(err, &tm):
		if w.TimeField == "" {
			return w.Prefix, "times must be RFC 3339, such as 2026-11-22T10:00:00Z"
		}
		f := at(w.TimeField)
		return f, f + " must be an RFC 3339 time such as 2026-11-22T10:00:00Z"
	}
	if name, ok := unknownField(err); ok {
		f := at(locate(data, name, w.Nested))
		return f, "unknown field " + strconv.Quote(f)
	}
	return w.Prefix, "request body is not valid: " + strings.TrimPrefix(err.Error(), "json: ")
}

// unknownField extracts the name from encoding/json's unknown-field error.
func unknownField(err error) (string, bool) {
	rest, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return "", false
	}
	name, err := strconv.Unquote(rest)
	return name, err == nil
}

// locate returns the path of an unknown member name: at the top level of
// data, or inside the first of the nested objects that has it.
func locate(data []byte, name string, nested []string) string {
	if has(data, name) {
		return name
	}
	for _, path := range nested {
		obj := data
		for part := range strings.SplitSeq(path, ".") {
			var m map[string]json.RawMessage
			if json.Unmarshal(obj, &m) != nil {
				obj = nil
				break
			}
			obj = m[part]
		}
		if obj != nil && has(obj, name) {
			return path + "." + name
		}
	}
	return name
}

// has tells whether data is an object with a member name.
func has(data []byte, name string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return false
	}
	_, ok := m[name]
	return ok
}

// kindName names the JSON kind of Go type t, for "must be an integer".
func kindName(t reflect.Type) string {
	if t == nil {
		return "of another type"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return kindName(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		if t == reflect.TypeFor[time.Time]() {
			return "an RFC 3339 time"
		}
		return "an object"
	}
	return "of another type"
}
