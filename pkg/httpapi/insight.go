package httpapi

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/internal/jsonbody"
	"github.com/sundialhq/sundial/internal/outbox"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/schedule"
)

// Read-only routes the dashboard needs beyond the contract: per-minute
// throughput for its charts, the history writer's backlog, and a preview of
// a schedule's next fire times while it is being written.

// throughputWindows are the windows GET /v1/throughput accepts.
var throughputWindows = map[string]time.Duration{
	"5m": 5 * time.Minute, "15m": 15 * time.Minute, "1h": time.Hour, "6h": 6 * time.Hour, "24h": 24 * time.Hour,
}

// throughputResult answers GET /v1/throughput.
type throughputResult struct {
	Window string            `json:"window"`
	Queues []queueThroughput `json:"queues"`
}

// queueThroughput is one queue's series, oldest minute first.
type queueThroughput struct {
	Queue   string              `json:"queue"`
	Minutes []queue.MinuteCount `json:"minutes"`
}

// throughput handles GET /v1/throughput?window=&queue=: per queue, one
// entry per minute of the window (the current, unfinished minute last).
func (s *Server) throughput(c *gin.Context) {
	if err := checkQuery(c, "window", "queue"); err != nil {
		fail(c, err)
		return
	}
	win := c.DefaultQuery("window", "1h")
	d, ok := throughputWindows[win]
	if !ok {
		fail(c, invalid("window", "window must be one of 5m, 15m, 1h, 6h, 24h"))
		return
	}
	ctx := c.Request.Context()
	names := c.QueryArray("queue")
	for _, q := range names {
		if !job.ValidQueue(q) {
			fail(c, invalid("queue", "queue must match [a-z0-9_-]{1,64}"))
			return
		}
	}
	if len(names) == 0 {
		var err error
		if names, err = s.q.Queues(ctx); err != nil {
			fail(c, err)
			return
		}
	}
	since := s.q.Now().Add(-d + time.Minute)
	out := throughputResult{Window: win, Queues: make([]queueThroughput, 0, len(names))}
	for _, q := range names {
		m, err := s.q.Throughput(ctx, q, since)
		if err != nil {
			fail(c, err)
			return
		}
		out.Queues = append(out.Queues, queueThroughput{Queue: q, Minutes: m})
	}
	c.JSON(http.StatusOK, out)
}

// historyBacklog answers GET /v1/history/backlog.
type historyBacklog struct {
	At         msTime              `json:"at"`
	Events     int64               `json:"events"`
	LagSeconds float64             `json:"lag_seconds"`
	Queues     []queueHistoryState `json:"queues"`
}

// queueHistoryState is one queue's part of the backlog.
type queueHistoryState struct {
	Queue      string  `json:"queue"`
	Events     int64   `json:"events"`
	LagSeconds float64 `json:"lag_seconds"`
}

// historyLag handles GET /v1/history/backlog: how many events the history
// writers have not recorded yet and how old the oldest is, measured now
// from Redis (the writers need not run in this process).
func (s *Server) historyLag(c *gin.Context) {
	if err := checkQuery(c); err != nil {
		fail(c, err)
		return
	}
	b, err := s.backlog.Measure(c.Request.Context())
	if err != nil {
		fail(c, err)
		return
	}
	out := historyBacklog{At: msTime(b.At), Events: b.Events, LagSeconds: b.Lag.Seconds(), Queues: make([]queueHistoryState, 0, len(b.Queues))}
	for _, q := range b.Queues {
		out.Queues = append(out.Queues, queueHistoryState{Queue: q.Queue, Events: q.Events, LagSeconds: q.Lag.Seconds()})
	}
	c.JSON(http.StatusOK, out)
}

// outboxView answers GET /v1/outbox.
type outboxView struct {
	Relays []outboxRelay `json:"relays"`
}

// outboxRelay is one outbox's relay, as its leader last wrote (outbox.Status).
type outboxRelay struct {
	Store      string  `json:"store"`
	RelayID    string  `json:"relay_id"`
	LagSeconds float64 `json:"lag_seconds"`
	Relayed    int64   `json:"relayed"`
	At         msTime  `json:"at"`
	// Running: a relay wrote within the last three status intervals.
	Running bool `json:"running"`
}

// outboxStatus handles GET /v1/outbox.
func (s *Server) outboxStatus(c *gin.Context) {
	if err := checkQuery(c); err != nil {
		fail(c, err)
		return
	}
	sts, err := outbox.ReadStatuses(c.Request.Context(), s.q.Redis())
	if err != nil {
		fail(c, err)
		return
	}
	out := outboxView{Relays: make([]outboxRelay, 0, len(sts))}
	for _, st := range sts {
		out.Relays = append(out.Relays, outboxRelay{Store: st.Store, RelayID: st.RelayID, LagSeconds: st.LagSeconds,
			Relayed: st.Relayed, At: msTime(st.At), Running: time.Since(st.At) < 3*outbox.StatusInterval})
	}
	c.JSON(http.StatusOK, out)
}

// schedulePreviewRequest is the timing part of a schedule.
type schedulePreviewRequest struct {
	Cron         string `json:"cron,omitempty"`
	EverySeconds *int   `json:"every_seconds,omitempty"`
	Timezone     string `json:"timezone,omitempty"`
}

// schedulePreview answers POST /v1/schedules/preview.
type schedulePreview struct {
	Upcoming []time.Time `json:"upcoming"`
}

// previewSchedule handles POST /v1/schedules/preview: the next five fire
// times of a timing, checked like PUT checks it, without storing anything.
func (s *Server) previewSchedule(c *gin.Context) {
	data, ok := s.body(c)
	if !ok {
		return
	}
	var in schedulePreviewRequest
	if err := jsonbody.Decode(data, &in, jsonbody.Strict); err != nil {
		fail(c, jsonError(err, data, jsonbody.Where{}))
		return
	}
	// An interval is aligned to now, as a schedule created now would be.
	now := s.q.Now()
	tt, err := schedule.Spec{Cron: in.Cron, EverySeconds: in.EverySeconds, Timezone: in.Timezone, Anchor: now}.Compile()
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, schedulePreview{Upcoming: tt.Upcoming(now, schedule.UpcomingCount)})
}
