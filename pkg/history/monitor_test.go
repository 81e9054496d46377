package history

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/internal/logbuf"
	"github.com/sundialhq/sundial/pkg/queue"
)

// TestMonitorBacklogLagAndWarning measures the backlog with no writer,
// then with a writer that has read but not acknowledged, and checks the
// metrics and the rate-limited warning.
func TestMonitorBacklogLagAndWarning(t *testing.T) {
	e := newEnv(t)
	var logs logbuf.Buffer
	m := NewMonitor(e.q, MonitorConfig{WarnBacklog: 1, WarnEvery: time.Hour, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	b, err := m.Measure(e.ctx)
	if err != nil || b.Events != 0 || b.Lag != 0 {
		t.Fatalf("empty: %+v, %v", b, err)
	}
	e.submit("mon-a", "t", 30)
	e.submit("mon-b", "t", 5)
	// Let the oldest event age; lag is measured from the entry's time.
	waitFor(t, 5*time.Second, "events age", func() bool {
		b, _ = m.Measure(e.ctx)
		return b.Lag >= 50*time.Millisecond
	})
	// The backlog counts stream entries: a batch submit writes one entry
	// for all its jobs' submitted events.
	na, nb := e.rdb.XLen(e.ctx, queue.EventStreamKey("mon-a")).Val(), e.rdb.XLen(e.ctx, queue.EventStreamKey("mon-b")).Val()
	if na == 0 || nb == 0 || b.Events != na+nb || len(b.Queues) != 2 || b.Queues[0].Events != na || b.Queues[1].Events != nb {
		t.Fatalf("no writer yet (%d and %d entries): %+v", na, nb, b)
	}
	// A group that read some entries without acknowledging them.
	key := queue.EventStreamKey("mon-a")
	e.rdb.XGroupCreateMkStream(e.ctx, key, DefaultGroup, "0")
	e.rdb.XReadGroup(e.ctx, &redis.XReadGroupArgs{Group: DefaultGroup, Consumer: "c", Streams: []string{key, ">"}, Count: 10, Block: -1})
	if b, err = m.Measure(e.ctx); err != nil || b.Queues[0].Events != na {
		t.Fatalf("pending + undelivered: %+v, %v", b, err)
	}
	if b.Queues[0].trimBefore == "" || compareIDs(b.Queues[0].trimBefore, e.entries("mon-a")[0].ID) != 0 {
		t.Fatalf("nothing acknowledged, yet trim bound %q", b.Queues[0].trimBefore)
	}
	if m.Lag() != b.Lag || m.Backlog().Events != na+nb {
		t.Fatalf("Lag/Backlog do not report the last measurement")
	}
	if n := strings.Count(logs.String(), "history backlog is growing"); n != 1 {
		t.Fatalf("%d warnings, want 1 (rate-limited):\n%s", n, logs.String())
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, mf := range mfs {
		got[mf.GetName()] = len(mf.GetMetric())
	}
	if got["sundial_history_backlog_events"] != 2 || got["sundial_history_lag_seconds"] != 2 {
		t.Fatalf("metrics: %v", got)
	}
	w := NewWriter(e.q, e.store, testWriterConfig())
	reg = prometheus.NewPedanticRegistry()
	reg.MustRegister(w.Collector())
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

// Redis' lag of a group can be wrong (its entries-read counter is off after
// an AOF restart or a take-over): the soak saw 57,000 events "waiting" in an
// empty stream whose group had delivered everything. The backlog must count
// only what is really pending or undelivered.
func TestMonitorIgnoresAWrongGroupLag(t *testing.T) {
	e := newEnv(t)
	m := NewMonitor(e.q, MonitorConfig{})
	e.submit("lagged", "t", 20)
	key := queue.EventStreamKey("lagged")
	e.rdb.XGroupCreateMkStream(e.ctx, key, DefaultGroup, "0")
	msgs := e.rdb.XReadGroup(e.ctx, &redis.XReadGroupArgs{Group: DefaultGroup, Consumer: "c", Streams: []string{key, ">"}, Count: 100, Block: -1}).Val()
	for _, m := range msgs[0].Messages {
		e.rdb.XAck(e.ctx, key, DefaultGroup, m.ID)
	}
	// Everything is delivered and acknowledged; make Redis' counter lie.
	if err := e.rdb.Do(e.ctx, "XGROUP", "SETID", key, DefaultGroup, "$", "ENTRIESREAD", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if b, err := m.Measure(e.ctx); err != nil || b.Events != 0 {
		t.Fatalf("backlog of a fully recorded stream = %+v, %v", b, err)
	}
	e.rdb.XTrimMaxLen(e.ctx, key, 0)
	if b, err := m.Measure(e.ctx); err != nil || b.Events != 0 {
		t.Fatalf("backlog of an empty, fully recorded stream = %+v, %v", b, err)
	}
	// New events after that are counted.
	e.submit("lagged", "t", 3)
	if b, err := m.Measure(e.ctx); err != nil || b.Events != 1 {
		t.Fatalf("1 new entry (3 submits in one batch): %+v, %v", b, err)
	}
}
