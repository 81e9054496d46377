// Package builtin holds the job types every Sundial worker registers, so the
// system can be tried without writing code: sundial.echo, sundial.sleep,
// sundial.fail and sundial.http.
package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/worker"
)

// Register adds the built-in handlers to w.
func Register(w *worker.Worker) {
	w.HandleFunc("sundial.echo", Echo)
	w.HandleFunc("sundial.sleep", Sleep)
	w.HandleFunc("sundial.fail", Fail)
	w.Handle("sundial.http", &HTTP{Client: &http.Client{}})
}

// Echo returns the job's payload as its result.
func Echo(_ context.Context, j *job.Job) (any, error) {
	if len(j.Payload) == 0 {
		return nil, nil
	}
	return j.Payload, nil
}

func decode(j *job.Job, v any) error {
	if len(j.Payload) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(j.Payload))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return worker.NoRetry(fmt.Errorf("bad payload for %s: %v", j.Type, err))
	}
	return nil
}

// Sleep waits {"ms": n} milliseconds (default 250), or until ctx ends.
func Sleep(ctx context.Context, j *job.Job) (any, error) {
	p := struct {
		MS int64 `json:"ms"`
	}{MS: 250}
	if err := decode(j, &p); err != nil {
		return nil, err
	}
	t := time.NewTimer(time.Duration(p.MS) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return map[string]int64{"slept_ms": p.MS}, nil
	}
}

// Fail fails the first {"times": n} attempts (default 1) with {"message"},
// then succeeds. times ≥ max_attempts makes the job end dead.
func Fail(_ context.Context, j *job.Job) (any, error) {
	p := struct {
		Times   int    `json:"times"`
		Message string `json:"message"`
	}{Times: 1, Message: "sundial.fail: planned failure"}
	if err := decode(j, &p); err != nil {
		return nil, err
	}
	if j.Attempt <= p.Times {
		return nil, fmt.Errorf("%s", p.Message)
	}
	return map[string]int{"failed_attempts": p.Times}, nil
}

// HTTP sends an outbound request (a webhook) described by the payload
// {"method", "url", "headers", "body"}; a non-2xx answer fails the attempt.
type HTTP struct {
	Client *http.Client
}

// maxBodyKept bounds how much of a response body is kept as the result.
const maxBodyKept = 4096

// Work sends the request under ctx (the job's timeout).
func (h *HTTP) Work(ctx context.Context, j *job.Job) (any, error) {
	p := struct {
		Method  string            `json:"method"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
		Body    json.RawMessage   `json:"body"`
	}{Method: http.MethodPost}
	if err := decode(j, &p); err != nil {
		return nil, err
	}
	var body io.Reader
	if len(p.Body) > 0 {
		// A JSON string body is sent as its text; anything else as JSON.
		var s string
		if json.Unmarshal(p.Body, &s) == nil {
			body = bytes.NewReader([]byte(s))
		} else {
			body = bytes.NewReader(p.Body)
		}
	}
	req, err := http.NewRequestWithContext(ctx, p.Method, p.URL, body)
	if err != nil || (req.URL.Scheme != "http" && req.URL.Scheme != "https") {
		return nil, worker.NoRetry(fmt.Errorf("sundial.http: bad request: need an http(s) url and a valid method"))
	}
	for k, v := range p.Headers {
		req.Header.Set(k, v)
	}
	resp, err := h.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("sundial.http: %w", err)
	}
	defer resp.Body.Close()
	kept, _ := io.ReadAll(io.LimitReader(resp.Body, maxBodyKept))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("sundial.http: %s %s answered %d", p.Method, req.URL.Redacted(), resp.StatusCode)
	}
	return map[string]any{"status": resp.StatusCode, "body": string(kept)}, nil
}
