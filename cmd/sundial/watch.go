package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// listFlag is a repeatable flag whose values may also be comma-separated.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// streamEvent is the part of a stream event the CLI shows.
type streamEvent struct {
	At       time.Time `json:"at"`
	Queue    string    `json:"queue"`
	JobID    string    `json:"job_id"`
	Type     string    `json:"type"`
	Event    string    `json:"event"`
	Attempt  int       `json:"attempt"`
	WorkerID string    `json:"worker_id"`
	Error    string    `json:"error"`
	Progress *int      `json:"progress"`
	Message  string    `json:"message"`
}

// runWatch handles "sundial watch": it follows the API's live stream
// (/v1/stream) and prints one line per job event until Ctrl-C.
func runWatch(ctx context.Context, a *app, args []string) error {
	fs := a.flags("watch")
	var queues, types, jobs listFlag
	fs.Var(&queues, "queue", "only events of this `queue` (repeatable, or comma-separated)")
	fs.Var(&types, "type", "only events of this job `type` (repeatable, or comma-separated)")
	fs.Var(&jobs, "job", "only events of this job `id` (repeatable, or comma-separated)")
	stats := fs.Bool("stats", false, "also print the once-a-second queue counts")
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("watch takes flags only, not %q", pos[0])
	}
	q := url.Values{}
	for name, vals := range map[string]listFlag{"queue": queues, "type": types, "job": jobs} {
		for _, v := range vals {
			q.Add(name, v)
		}
	}
	dial, err := a.streamDialer(ctx, q)
	if err != nil {
		return err
	}
	conn, err := dial()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	// Once connected, a lost connection (an API restart, a client that fell
	// behind) is dialled again until Ctrl-C; events in the gap are missed,
	// which stderr says.
	delay := 250 * time.Millisecond
	for {
		err := a.follow(ctx, conn, *stats)
		conn.CloseNow()
		if ctx.Err() != nil {
			return nil // Ctrl-C
		}
		fmt.Fprintf(a.env.stderr, "sundial: stream lost (%v); reconnecting, events until then are missed\n", err)
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(delay):
			}
			if conn, err = dial(); err == nil {
				break
			}
			var ae *apiError
			if errors.As(err, &ae) && (ae.Status == 401 || ae.Status == 403) {
				return err
			}
			delay = min(2*delay, 5*time.Second)
		}
		delay = 250 * time.Millisecond
	}
}

// follow prints what conn sends until it fails or ctx ends.
func (a *app) follow(ctx context.Context, conn *websocket.Conn, stats bool) error {
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				conn.Close(websocket.StatusNormalClosure, "")
			}
			return err
		}
		var msg struct {
			Kind  string          `json:"kind"`
			Event json.RawMessage `json:"event"`
		}
		if json.Unmarshal(data, &msg) != nil {
			continue
		}
		switch {
		case msg.Kind == "event" && a.opts.json:
			fmt.Fprintf(a.env.stdout, "%s\n", msg.Event)
		case msg.Kind == "event":
			var e streamEvent
			if json.Unmarshal(msg.Event, &e) == nil {
				fmt.Fprintln(a.env.stdout, eventLine(&e))
			}
		case msg.Kind == "stats" && stats:
			if a.opts.json {
				fmt.Fprintf(a.env.stdout, "%s\n", data)
			} else {
				fmt.Fprintln(a.env.stdout, statsLine(data))
			}
		}
	}
}

// eventLine is one event as a line: time, queue, job, type, event, then
// the details the event has.
func eventLine(e *streamEvent) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s  %s  %s  %s", e.At.UTC().Format(apiTimeLayout), e.Queue, e.JobID, e.Type, e.Event)
	if e.Attempt > 0 {
		fmt.Fprintf(&b, "  attempt=%d", e.Attempt)
	}
	if e.WorkerID != "" {
		fmt.Fprintf(&b, "  worker=%s", e.WorkerID)
	}
	if e.Progress != nil {
		fmt.Fprintf(&b, "  progress=%d%%", *e.Progress)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, "  message=%q", e.Message)
	}
	if e.Error != "" {
		fmt.Fprintf(&b, "  error=%q", e.Error)
	}
	return b.String()
}

// statsLine summarises a stats message: per queue, its due, active and
// dead jobs.
func statsLine(data []byte) string {
	var s struct {
		At      time.Time   `json:"at"`
		Workers int         `json:"workers"`
		Queues  []queueView `json:"queues"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return "stats: " + err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s  stats  workers=%d", s.At.UTC().Format(apiTimeLayout), s.Workers)
	for _, q := range s.Queues {
		fmt.Fprintf(&b, "  %s: queued=%d active=%d dead=%d", q.Name, q.Queued.High+q.Queued.Normal+q.Queued.Low, q.Active, q.Dead)
	}
	return b.String()
}

// streamDialer returns a function that opens the API's live stream
// (/v1/stream) with query q, within the request timeout.
func (a *app) streamDialer(ctx context.Context, q url.Values) (func() (*websocket.Conn, error), error) {
	u, err := url.Parse(strings.TrimRight(a.opts.url, "/") + "/v1/stream")
	if err != nil {
		return nil, usagef("bad API URL %q: %v", a.opts.url, err)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	}
	u.RawQuery = q.Encode()
	hdr := http.Header{}
	if a.opts.apiKey != "" {
		hdr.Set("Authorization", "Bearer "+a.opts.apiKey)
	}
	return func() (*websocket.Conn, error) {
		dialCtx, cancel := context.WithTimeout(ctx, a.opts.timeout)
		defer cancel()
		conn, res, err := websocket.Dial(dialCtx, u.String(), &websocket.DialOptions{HTTPHeader: hdr})
		if err != nil {
			if res != nil && res.StatusCode >= 400 {
				return nil, &apiError{Status: res.StatusCode, Code: "http_error", Message: "the stream refused the connection: " + res.Status}
			}
			return nil, fmt.Errorf("cannot reach the stream at %s: %v", u.Redacted(), err)
		}
		conn.SetReadLimit(16 << 20)
		return conn, nil
	}, nil
}
