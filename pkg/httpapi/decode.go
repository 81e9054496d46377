package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/gin-gonic/gin"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/sundialhq/sundial/internal/jsonbody"
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

// body reads the required JSON body of a request that takes no query
// parameters (readBody, checkQuery); on an error it answers it and
// returns false.
func (s *Server) body(c *gin.Context) ([]byte, bool) {
	data, err := readBody(c, s.cfg.MaxBodyBytes, false)
	if err == nil {
		err = checkQuery(c)
	}
	if err != nil {
		fail(c, err)
		return nil, false
	}
	return data, true
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

// strictV2 are the options of decodeFast: unknown members refused, as
// jsonbody.Decode does. jsonv2's defaults are stricter than encoding/json's
// in the rest: names match case-sensitively, a duplicate name and invalid
// UTF-8 are refused, and its own RFC 3339 parser refuses times that
// time.Time's UnmarshalJSON takes (a comma before the fraction, a one-digit
// hour, an offset of +24:00 or +01:60), which then go to encoding/json like
// any body the fast path refuses. (Reading times with UnmarshalJSON here
// instead, through an unmarshaler option, cost ~10 % of every batch's
// decoding, times or not: BenchmarkDecodeBatch.)
var strictV2 = jsonv2.JoinOptions(
	jsonv2.RejectUnknownMembers(true),
)

// decodeFast decodes data into v (a pointer to a zero value) with
// github.com/go-json-experiment/json, which reads a job submission in one
// pass at about twice encoding/json's speed (BenchmarkDecodeBatch); the job
// bodies are most of the API's decoding. It reports whether that worked.
// It accepts a subset of what jsonbody.Decode (strict) accepts, with the same result
// (FuzzDecodeFastAgrees): when it refuses, *v is zeroed and the caller
// decodes with jsonbody.Decode, which decides, and words the error.
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
	if err := jsonbody.Decode(data, &s, jsonbody.Strict); err != nil {
		return nil, jsonError(err, data, specWhere(""))
	}
	return &s, nil
}

// decodeBatch decodes the body of POST /v1/jobs/batch in one pass; when
// that fails, the body is decoded again job by job to name the field at
// fault as "jobs[i].x".
func decodeBatch(data []byte) ([]job.Spec, error) {
	var b batchRequest
	if !decodeFast(data, &b) {
		if err := jsonbody.Decode(data, &b, jsonbody.Strict); err != nil {
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
	if err := jsonbody.Decode(data, &raw, jsonbody.Strict); err != nil {
		return jsonError(err, data, jsonbody.Where{})
	}
	for i, r := range raw.Jobs {
		var s job.Spec
		if err := jsonbody.Decode(r, &s, jsonbody.Strict); err != nil {
			return jsonError(err, r, specWhere(fmt.Sprintf("jobs[%d]", i)))
		}
	}
	return jsonError(first, data, jsonbody.Where{})
}

// jsonError turns a decoding error of data into an API error naming the
// member at fault (jsonbody.Explain).
func jsonError(err error, data []byte, w jsonbody.Where) *apiError {
	field, msg := jsonbody.Explain(err, data, w)
	return invalid(field, "%s", msg)
}

// specWhere is where a job spec's members are, for jsonError: its
// object-valued member and its one time, under prefix ("jobs[3]").
func specWhere(prefix string) jsonbody.Where {
	return jsonbody.Where{Prefix: prefix, Nested: []string{"backoff", "debounce", "sequence"}, TimeField: "run_at"}
}
