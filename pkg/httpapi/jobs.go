package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// jobList is the answer of POST /v1/jobs/batch.
type jobList struct {
	Jobs []*job.Job `json:"jobs"`
}

// now is the engine's clock at the millisecond, the precision Redis keeps,
// so that a submitted job reads the same in the answer and in a later GET.
func (s *Server) now() time.Time { return s.q.Now().UTC().Truncate(time.Millisecond) }

// submitJob handles POST /v1/jobs: 201 with the new job, or 200 with the
// earlier job when the idempotency key names one.
func (s *Server) submitJob(c *gin.Context) {
	data, err := readBody(c, s.cfg.MaxBodyBytes, false)
	if err != nil {
		fail(c, err)
		return
	}
	spec, err := decodeSubmit(data)
	if err == nil {
		err = s.q.ApplyTypeDefaults(c.Request.Context(), spec)
	}
	if err != nil {
		fail(c, err)
		return
	}
	j, err := spec.BuildDecoded(s.now())
	if err != nil {
		fail(c, err)
		return
	}
	if j.Traceparent == "" {
		j.Traceparent = requestTraceparent(c)
	}
	res, err := s.q.Submit(c.Request.Context(), []*job.Job{j})
	if err != nil {
		fail(c, err)
		return
	}
	status := http.StatusCreated
	if res[0].Duplicate || res[0].Debounced {
		status = http.StatusOK
	}
	c.Header("Location", "/v1/jobs/"+res[0].Job.ID)
	writeJob(c, status, res[0].Job)
}

// submitBatch handles POST /v1/jobs/batch: all jobs or none, 201 with the
// jobs in order (an idempotent duplicate appears as the earlier job).
func (s *Server) submitBatch(c *gin.Context) {
	data, err := readBody(c, s.cfg.MaxBatchBodyBytes, false)
	if err != nil {
		fail(c, err)
		return
	}
	specs, err := decodeBatch(data)
	if err == nil {
		err = s.q.ApplyTypeDefaults(c.Request.Context(), pointers(specs)...)
	}
	if err != nil {
		fail(c, err)
		return
	}
	now := s.now()
	traceparent := requestTraceparent(c)
	jobs := make([]*job.Job, len(specs))
	for i := range specs {
		j, err := specs[i].BuildDecoded(now)
		if err != nil {
			var fe *job.FieldError
			if errors.As(err, &fe) {
				err = fe.Prefix(fmt.Sprintf("jobs[%d]", i))
			}
			fail(c, err)
			return
		}
		if j.Traceparent == "" {
			j.Traceparent = traceparent
		}
		jobs[i] = j
	}
	// When the jobs stored are exactly these, the answer is encoded on
	// another core while Redis stores them.
	var answer chan encodedAnswer
	if len(jobs) >= overlapAnswerMin && queue.UnchangedBySubmit(jobs) {
		answer = make(chan encodedAnswer, 1)
		go func() { answer <- encodeJobList(jobs) }()
	}
	res, err := s.q.Submit(c.Request.Context(), jobs)
	if answer != nil {
		a := <-answer
		defer a.release()
		if err == nil {
			a.write(c, http.StatusCreated)
			return
		}
	}
	if err != nil {
		fail(c, &batchError{err})
		return
	}
	out := make([]*job.Job, len(res))
	for i, r := range res {
		out[i] = r.Job
	}
	writeJobList(c, http.StatusCreated, out)
}

// overlapAnswerMin is the smallest batch whose answer is encoded while
// the jobs are stored: ~0.6 µs per job against a goroutine's start.
const overlapAnswerMin = 16

// jsonMediaType is the Content-Type of JSON answers, as c.JSON sends it.
const jsonMediaType = "application/json; charset=utf-8"

// appendJob appends j as JSON. job.Job.MarshalJSON already yields the
// compact, HTML-escaped bytes that json.Marshal (and so c.JSON) would send
// for it; using them directly skips the reflection over the outer value and
// json.Marshal's second pass over the output, which was most of a batch
// answer's cost.
func appendJob(buf []byte, j *job.Job) ([]byte, error) {
	if j == nil {
		return append(buf, "null"...), nil
	}
	b, err := j.AppendJSON(buf)
	if err != nil {
		return buf, err
	}
	return b, nil
}

// writeJob answers with one job, byte for byte what c.JSON sends.
func writeJob(c *gin.Context, status int, j *job.Job) {
	b, err := appendJob(nil, j)
	if err != nil {
		fail(c, err)
		return
	}
	c.Data(status, jsonMediaType, b)
}

// answerBuffers are the buffers of batch answers; one of more than
// maxPooledAnswer bytes (jobs with large payloads) is left to the GC.
var answerBuffers = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledAnswer = 4 << 20

// writeJobList answers with a jobList, byte for byte what c.JSON sends.
func writeJobList(c *gin.Context, status int, jobs []*job.Job) {
	a := encodeJobList(jobs)
	defer a.release()
	a.write(c, status)
}

// encodedAnswer is a jobList encoded into a buffer of answerBuffers.
type encodedAnswer struct {
	buf *[]byte
	b   []byte
	err error
}

func encodeJobList(jobs []*job.Job) encodedAnswer {
	buf := answerBuffers.Get().(*[]byte)
	b, err := appendJobList((*buf)[:0], jobs)
	return encodedAnswer{buf: buf, b: b, err: err}
}

// write sends the answer (or the encoding's error).
func (a encodedAnswer) write(c *gin.Context, status int) {
	if a.err != nil {
		fail(c, a.err)
		return
	}
	c.Data(status, jsonMediaType, a.b) // the body is written before c.Data returns
}

// release gives the buffer back once the answer is written; one grown
// past maxPooledAnswer is left to the GC.
func (a encodedAnswer) release() {
	if cap(a.b) <= maxPooledAnswer {
		*a.buf = a.b[:0]
		answerBuffers.Put(a.buf)
	}
}

func appendJobList(buf []byte, jobs []*job.Job) ([]byte, error) {
	if jobs == nil {
		return append(buf, `{"jobs":null}`...), nil
	}
	buf = append(buf, `{"jobs":[`...)
	for i, j := range jobs {
		if i > 0 {
			buf = append(buf, ',')
		}
		var err error
		if buf, err = appendJob(buf, j); err != nil {
			return buf, err
		}
	}
	return append(buf, "]}"...), nil
}

// getJob handles GET /v1/jobs/{id}: live from Redis, else from the history
// store once the job has left Redis.
func (s *Server) getJob(c *gin.Context) {
	if err := checkQuery(c); err != nil {
		fail(c, err)
		return
	}
	ctx := c.Request.Context()
	id := c.Param("id")
	j, err := s.q.Get(ctx, id)
	if errors.Is(err, queue.ErrNotFound) && s.cfg.History != nil {
		j, err = s.cfg.History.Job(ctx, id)
		err = historyErr(err)
	}
	if err != nil {
		fail(c, err)
		return
	}
	writeJob(c, http.StatusOK, j)
}

// cancelJob handles POST /v1/jobs/{id}/cancel.
func (s *Server) cancelJob(c *gin.Context) {
	s.jobAction(c, s.q.Cancel)
}

// retryJob handles POST /v1/jobs/{id}/retry.
func (s *Server) retryJob(c *gin.Context) {
	s.jobAction(c, s.q.Retry)
}

// jobAction runs a one-job transition. The body is optional; when sent it
// must be an empty JSON object.
func (s *Server) jobAction(c *gin.Context, act func(context.Context, string) (*job.Job, error)) {
	if err := s.emptyBody(c); err != nil {
		fail(c, err)
		return
	}
	j, err := act(c.Request.Context(), c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	writeJob(c, http.StatusOK, j)
}

// pointers returns pointers to the elements of s.
func pointers[T any](s []T) []*T {
	out := make([]*T, len(s))
	for i := range s {
		out[i] = &s[i]
	}
	return out
}
