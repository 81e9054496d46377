package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

var benchSpec = []byte(`{"queue":"bench","type":"email.send","payload":{"to":"someone@example.com","template":"welcome","vars":{"name":"Ada"}},"priority":"high","max_attempts":5}`)

func BenchmarkDecodeSubmit(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeSubmit(benchSpec); err != nil {
			b.Fatal(err)
		}
	}
}

// benchBatch is a batch body of MaxBatchJobs benchSpec jobs.
func benchBatch() []byte {
	body := bytes.NewBufferString(`{"jobs":[`)
	for i := range MaxBatchJobs {
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(benchSpec)
	}
	body.WriteString(`]}`)
	return body.Bytes()
}

func BenchmarkDecodeBatch(b *testing.B) {
	body := benchBatch()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeBatch(body); err != nil {
			b.Fatal(err)
		}
	}
}

// benchPost sends body to path and fails b unless the answer is 201.
func benchPost(b *testing.B, a *testAPI, path string, body []byte) {
	req, _ := http.NewRequest("POST", a.base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err := a.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		b.Fatalf("status %d", res.StatusCode)
	}
}

// BenchmarkSubmitHTTP measures POST /v1/jobs end to end over loopback
// (client and server in this process, Redis in its own).
func BenchmarkSubmitHTTP(b *testing.B) {
	a := startOn(b, queuetest.Start(b), func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil)) })
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			benchPost(b, a, "/v1/jobs", benchSpec)
		}
	})
}

// BenchmarkSubmitHTTPRateLimited is BenchmarkSubmitHTTP with the rate
// limiter on, as the API runs by default (a budget never reached).
func BenchmarkSubmitHTTPRateLimited(b *testing.B) {
	a := startOn(b, queuetest.Start(b), func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		c.RateLimit = "100000000-M"
	})
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			benchPost(b, a, "/v1/jobs", benchSpec)
		}
	})
}

// BenchmarkSubmitBatchHTTP measures POST /v1/jobs/batch of 1000 jobs end
// to end over loopback, one request at a time (client and server in this
// process, Redis in its own, without AOF): the wall time a single producer
// waits per batch.
func BenchmarkSubmitBatchHTTP(b *testing.B) {
	a := startOn(b, queuetest.StartWith(b, "--appendonly", "no"), func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil)) })
	body := benchBatch()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		benchPost(b, a, "/v1/jobs/batch", body)
	}
}

// BenchmarkPublish measures the hub's fan-out of one event to 500 clients
// (filter, encode once, offer to each buffer), without the socket writes.
func BenchmarkPublish(b *testing.B) {
	h := newHub(queue.New(nil, queue.Options{}), StreamOptions{ClientBuffer: 1 << 20}, 0, newMetrics(), discardLogger())
	for range 500 {
		c := &client{send: make(chan []byte, 1<<16), dropped: make(chan struct{})}
		next := append(h.snapshot(), c)
		h.clients.Store(&next)
	}
	e := &streamEvent{ID: "1-0", JobID: "01JD0000000000000000000000", Queue: "default", Type: "email.send", Event: "submitted", State: "queued"}
	b.ReportAllocs()
	for b.Loop() {
		h.publish(e)
		for _, c := range h.snapshot() {
			<-c.send
		}
	}
}

// benchJobs are MaxBatchJobs jobs as a batch answer holds them.
func benchJobs(b *testing.B) []*job.Job {
	var spec job.Spec
	if err := json.Unmarshal(benchSpec, &spec); err != nil {
		b.Fatal(err)
	}
	jobs := make([]*job.Job, MaxBatchJobs)
	for i := range jobs {
		j, err := spec.Build(time.Now())
		if err != nil {
			b.Fatal(err)
		}
		jobs[i] = j
	}
	return jobs
}

// BenchmarkEncodeBatch measures the answer of a 1000-job batch: the
// job.Job.AppendJSON output of each, joined into a reused buffer (see
// writeJobList).
func BenchmarkEncodeBatch(b *testing.B) {
	jobs := benchJobs(b)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = appendJobList(buf[:0], jobs); err != nil {
			b.Fatal(err)
		}
	}
}
