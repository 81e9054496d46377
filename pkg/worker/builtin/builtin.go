// Package builtin holds the job types every Sundial worker registers, so the
// system can be tried without writing code: sundial.echo, sundial.sleep,
// sundial.fail and sundial.http.
package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sundialhq/sundial/pkg/egress"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/worker"
)

// Config configures the built-in handlers.
type Config struct {
	// HTTPAllow is what sundial.http may reach besides public addresses
	// (SUNDIAL_HTTP_JOB_ALLOW); nil = public addresses only.
	HTTPAllow *egress.Policy
}

// Register adds the built-in handlers to w, with sundial.http limited to
// public addresses.
func Register(w *worker.Worker) { RegisterWith(w, Config{}) }

// RegisterWith adds the built-in handlers to w, configured by c.
func RegisterWith(w *worker.Worker, c Config) {
	w.HandleFunc("sundial.echo", Echo)
	w.HandleFunc("sundial.sleep", Sleep)
	w.HandleFunc("sundial.fail", Fail)
	w.Handle("sundial.http", NewHTTP(c.HTTPAllow))
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
// {"method", "url", "headers", "body", "keep_body"}; a non-2xx answer fails
// the attempt. It reaches only what its policy allows (package egress):
// public addresses, plus what SUNDIAL_HTTP_JOB_ALLOW lists. The policy
// applies to every address dialled, after name resolution, redirects
// included; a refused request fails the attempt without retry. The result
// is {"status": 200}, plus "body" (the first 4 KiB, as text) when the
// payload asks for it with "keep_body": true.
//
// The zero HTTP allows public addresses only.
type HTTP struct {
	once   sync.Once
	policy *egress.Policy
	client *http.Client
}

// NewHTTP returns the sundial.http handler under policy p (nil = public
// addresses only).
func NewHTTP(p *egress.Policy) *HTTP { return &HTTP{policy: p} }

const (
	// maxBodyKept bounds how much of a response body is kept as the result.
	maxBodyKept = 4096
	// MaxRedirects is how many redirects sundial.http follows; one more
	// fails the attempt without retry.
	MaxRedirects = 10
	// TLSHandshakeTimeout bounds a TLS handshake. Connecting to one
	// address is bounded by egress.DialTimeout, and the whole request
	// (redirects and the body included) by the job's timeout.
	TLSHandshakeTimeout = 10 * time.Second
)

// errTooManyRedirects fails a request past MaxRedirects.
var errTooManyRedirects = fmt.Errorf("stopped after %d redirects", MaxRedirects)

// httpClient builds h's client once: its transport dials through the
// policy and ignores HTTP(S)_PROXY (a proxy would resolve and connect on
// the worker's behalf, out of the policy's sight), and every redirect's
// URL is checked before it is followed.
func (h *HTTP) httpClient() *http.Client {
	h.once.Do(func() {
		h.client = &http.Client{
			Transport: &http.Transport{
				Proxy:                 nil,
				DialContext:           h.policy.DialContext,
				TLSHandshakeTimeout:   TLSHandshakeTimeout,
				ForceAttemptHTTP2:     true,
				MaxIdleConns:          100,
				IdleConnTimeout:       90 * time.Second,
				ExpectContinueTimeout: time.Second,
			},
			CheckRedirect: func(req *http.Request, via []*http.Request) error {
				if len(via) > MaxRedirects {
					return errTooManyRedirects
				}
				return h.policy.CheckURL(req.URL)
			},
		}
	})
	return h.client
}

// Work sends the request under ctx (the job's timeout).
func (h *HTTP) Work(ctx context.Context, j *job.Job) (any, error) {
	p := struct {
		Method   string            `json:"method"`
		URL      string            `json:"url"`
		Headers  map[string]string `json:"headers"`
		Body     json.RawMessage   `json:"body"`
		KeepBody bool              `json:"keep_body"`
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
	if err != nil || (req.URL.Scheme != "http" && req.URL.Scheme != "https") || req.URL.Hostname() == "" {
		return nil, worker.NoRetry(fmt.Errorf("sundial.http: bad request: need an http(s) url and a valid method"))
	}
	if err := h.policy.CheckURL(req.URL); err != nil {
		return nil, worker.NoRetry(fmt.Errorf("sundial.http: %w", err))
	}
	for k, v := range p.Headers {
		req.Header.Set(k, v)
	}
	// Who sends it, so that the receiver can tell attempts apart and refuse
	// a stale one: the job, the attempt and its lease's fencing token.
	req.Header.Set("Sundial-Job-Id", j.ID)
	req.Header.Set("Sundial-Attempt", strconv.Itoa(j.Attempt))
	if l, ok := worker.LeaseOf(ctx); ok {
		req.Header.Set("Sundial-Fencing-Token", l.Token)
		if !l.Held(time.Now()) {
			// The worker no longer trusts the lease (a pause, Redis
			// unreachable): another attempt may run; send nothing.
			return nil, worker.ErrLeaseLost
		}
	}
	resp, err := h.httpClient().Do(req)
	if err != nil {
		var refused *egress.RefusedError
		switch {
		case errors.As(err, &refused):
			return nil, worker.NoRetry(fmt.Errorf("sundial.http: %w", refused))
		case errors.Is(err, errTooManyRedirects):
			return nil, worker.NoRetry(fmt.Errorf("sundial.http: %s %s: %w", p.Method, req.URL.Redacted(), errTooManyRedirects))
		}
		return nil, fmt.Errorf("sundial.http: %w", err)
	}
	defer resp.Body.Close()
	kept, _ := io.ReadAll(io.LimitReader(resp.Body, maxBodyKept))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("sundial.http: %s %s answered %d", p.Method, req.URL.Redacted(), resp.StatusCode)
	}
	result := map[string]any{"status": resp.StatusCode}
	if p.KeepBody {
		result["body"] = string(kept)
	}
	return result, nil
}
