package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/sundialhq/sundial/pkg/job"
)

// MaxBatchJobs is the most jobs one POST /v1/jobs/batch may submit.
const MaxBatchJobs = 1000

// batchRequest is the body of POST /v1/jobs/batch.
type batchRequest struct {
	Jobs []job.Spec `json:"jobs"`
}

// deadSelection is the optional body of the dead-letter actions: the jobs
// to act on, or every dead job of the queue when IDs is absent.
type deadSelection struct {
	IDs []string `json:"ids,omitempty"`
}

// readBody reads the request body, at most limit bytes (413 beyond), and
// requires it to be JSON (415 otherwise). An optional body may be absent or
// empty, whatever its Content-Type: readBody then returns nil.
func readBody(c *gin.Context, limit int64, optional bool) ([]byte, error) {
	r := c.Request
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	if optional && (r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody) {
		return nil, nil
	}
	isJSON := jsonContentType(r.Header.Get("Content-Type"))
	if r.ContentLength > 0 && !isJSON {
		return nil, errMediaType
	}
	var data []byte
	var err error
	body := http.MaxBytesReader(c.Writer, r.Body, limit)
	if r.ContentLength > 0 {
		data = make([]byte, r.ContentLength)
		_, err = io.ReadFull(body, data)
	} else {
		data, err = io.ReadAll(body)
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, err
		}
		return nil, invalid("", "could not read the request body")
	}
	switch {
	case len(data) == 0 && optional:
		return nil, nil
	case !isJSON:
		return nil, errMediaType
	case len(data) == 0:
		return nil, invalid("", "request body is empty: send a JSON object")
	}
	return data, nil
}

var errMediaType = &apiError{Status: http.StatusUnsupportedMediaType, Code: codeUnsupportedMediaType, Message: "Content-Type must be application/json"}

// jsonContentType accepts application/json with at most a utf-8 charset.
func jsonContentType(ct string) bool {
	if ct == "application/json" {
		return true
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return false
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return false
		}
	}
	return true
}

// decodeStrict decodes exactly one JSON value from data into v, rejecting
// unknown fields and anything after the value.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errTrailing
	}
	return nil
}

var errTrailing = errors.New("trailing data")

// strictV2 are the options of decodeFast: unknown members refused, as
// decodeStrict does, and a time read by time.Time's own UnmarshalJSON, the
// method encoding/json uses (jsonv2 has its own RFC 3339 parser).
// jsonv2's defaults are stricter than encoding/json's in the rest: names
// match case-sensitively, a duplicate name and invalid UTF-8 are refused.
var strictV2 = jsonv2.JoinOptions(
	jsonv2.RejectUnknownMembers(true),
	jsonv2.WithUnmarshalers(jsonv2.UnmarshalFunc(func(b []byte, t *time.Time) error { return t.UnmarshalJSON(b) })),
)

// decodeFast decodes data into v (a pointer to a zero value) with
// github.com/go-json-experiment/json, which reads a job submission in one
// pass at about twice encoding/json's speed (BenchmarkDecodeBatch); the job
// bodies are most of the API's decoding. It reports whether that worked.
// It accepts a subset of what decodeStrict accepts, with the same result
// (FuzzDecodeFastAgrees): when it refuses, *v is zeroed and the caller
// decodes with decodeStrict, which decides, and words the error.
func decodeFast(data []byte, v any) bool {
	if jsonv2.Unmarshal(data, v, strictV2) == nil {
		return true
	}
	reflect.ValueOf(v).Elem().SetZero()
	return false
}

// decodeSubmit decodes the body of POST /v1/jobs. Errors are *apiError
// naming the field at fault.
func decodeSubmit(data []byte) (*job.Spec, error) {
	var s job.Spec
	if decodeFast(data, &s) {
		return &s, nil
	}
	if err := decodeStrict(data, &s); err != nil {
		return nil, jsonError(err, data, "", specObjects)
	}
	return &s, nil
}

// decodeBatch decodes the body of POST /v1/jobs/batch in one pass; when
// that fails, the body is decoded again job by job to name the field at
// fault as "jobs[i].x".
func decodeBatch(data []byte) ([]job.Spec, error) {
	var b batchRequest
	if !decodeFast(data, &b) {
		if err := decodeStrict(data, &b); err != nil {
			return nil, locateBatchError(data, err)
		}
	}
	if len(b.Jobs) == 0 || len(b.Jobs) > MaxBatchJobs {
		return nil, invalid("jobs", "jobs must hold between 1 and %d jobs, not %d", MaxBatchJobs, len(b.Jobs))
	}
	return b.Jobs, nil
}

func locateBatchError(data []byte, first error) error {
	var raw struct {
		Jobs []json.RawMessage `json:"jobs"`
	}
	if err := decodeStrict(data, &raw); err != nil {
		return jsonError(err, data, "", nil)
	}
	for i, r := range raw.Jobs {
		var s job.Spec
		if err := decodeStrict(r, &s); err != nil {
			return jsonError(err, r, fmt.Sprintf("jobs[%d]", i), specObjects)
		}
	}
	return jsonError(first, data, "", nil)
}

// specObjects are the fields of job.Spec that hold objects whose own
// unknown fields must be found (payload holds anything and is not searched).
var specObjects = []string{"backoff"}

// jsonError turns a decoding error of data into an API error naming the
// field, under prefix ("jobs[3]"). nested lists the object-valued fields
// searched for an unknown field's location.
func jsonError(err error, data []byte, prefix string, nested []string) *apiError {
	at := func(field string) string {
		switch {
		case prefix == "":
			return field
		case field == "":
			return prefix
		}
		return prefix + "." + field
	}
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
		tm     *time.ParseError
	)
	switch {
	case errors.Is(err, io.EOF):
		if prefix != "" {
			return invalid(prefix, "%s must be a JSON object", prefix)
		}
		return invalid("", "request body is empty: send a JSON object")
	case errors.Is(err, errTrailing):
		return invalid(prefix, "unexpected data after the JSON value")
	case errors.As(err, &syntax):
		return invalid(prefix, "malformed JSON at byte %d: %s", syntax.Offset, strings.TrimPrefix(syntax.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid(prefix, "malformed JSON: unexpected end of input")
	case errors.As(err, &typ):
		f := at(typ.Field)
		if f == "" {
			return invalid("", "request body must be a JSON object")
		}
		return invalid(f, "%s must be %s", f, kindName(typ.Type))
	case errors.As(err, &tm):
		f := at("run_at")
		return invalid(f, "%s must be an RFC 3339 time such as 2026-11-22T10:00:00Z", f)
	}
	if name, ok := unknownField(err); ok {
		f := at(locateField(data, name, nested))
		return invalid(f, "unknown field %q", f)
	}
	return invalid(prefix, "request body is not valid: %s", strings.TrimPrefix(err.Error(), "json: "))
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

// locateField returns the path of an unknown field name: at the top level
// of data, or inside one of the nested objects.
func locateField(data []byte, name string, nested []string) string {
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return name
	}
	if _, ok := top[name]; ok {
		return name
	}
	for _, obj := range nested {
		var m map[string]json.RawMessage
		if json.Unmarshal(top[obj], &m) == nil {
			if _, ok := m[name]; ok {
				return obj + "." + name
			}
		}
	}
	return name
}

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
