package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
)

// Job logs (docs/concepts.md, "Job logs"): what a running attempt's
// handler logged, kept with the job in Redis (lua/log.lua) up to a cap,
// the oldest dropped first and counted.
const (
	// DefaultLogCap is how many lines a job keeps unless Options.LogCap says.
	DefaultLogCap = 1000
	// MaxLogLinesPerCall bounds one AppendLogs call.
	MaxLogLinesPerCall = 100
	// MaxLogMessageBytes bounds a line's message: a longer one is cut.
	MaxLogMessageBytes = 8 << 10
	// MaxLogFields bounds a line's fields.
	MaxLogFields = 20
)

// The levels of a log line.
var LogLevels = []string{"debug", "info", "warn", "error"}

// LogLine is one line a handler logged.
type LogLine struct {
	// Seq numbers the job's lines from 1, over all its attempts.
	Seq     int64             `json:"seq"`
	At      job.Time          `json:"at"`
	Attempt int               `json:"attempt"`
	Level   string            `json:"level"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields,omitempty"`
}

// LogEntry is a line to append (AppendLogs).
type LogEntry struct {
	Level   string            `json:"level"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields,omitempty"`
}

// Check validates e, cutting a message that is too long; the error names
// the field at fault.
func (e *LogEntry) Check() error {
	ok := false
	for _, l := range LogLevels {
		ok = ok || e.Level == l
	}
	if !ok {
		return fmt.Errorf("level must be one of %s", strings.Join(LogLevels, ", "))
	}
	if len(e.Fields) > MaxLogFields {
		return fmt.Errorf("fields may hold at most %d entries", MaxLogFields)
	}
	if len(e.Message) > MaxLogMessageBytes {
		cut := MaxLogMessageBytes
		for cut > 0 && e.Message[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
			cut--
		}
		e.Message = e.Message[:cut] + "…"
	}
	return nil
}

// ErrTooManyLogLines is AppendLogs' answer to more than MaxLogLinesPerCall lines.
var ErrTooManyLogLines = errors.New("at most 100 log lines a call")

// AppendLogs keeps lines that lease's attempt logged and returns the seq
// of the first. ErrLeaseLost when the attempt no longer holds the lease
// (nothing kept).
func (c *Client) AppendLogs(ctx context.Context, queue string, l Lease, lines []LogEntry) (int64, error) {
	if len(lines) > MaxLogLinesPerCall {
		return 0, ErrTooManyLogLines
	}
	s := c.scripts.log
	cap := c.opts.LogCap
	if cap <= 0 {
		cap = DefaultLogCap
	}
	// The tag names the call, so that the same call sent again after a
	// lost reply keeps nothing twice (lua/log.lua).
	cmd := append(c.command(s, c.keysFor(queue), c.opts.Now(), 4+len(lines)), l.Job.ID, l.Token, cap, tokenTags(1))
	for i := range lines {
		if err := lines[i].Check(); err != nil {
			return 0, fmt.Errorf("log line %d: %w", i, err)
		}
		b, err := json.Marshal(lines[i])
		if err != nil {
			return 0, err
		}
		cmd = append(cmd, b)
	}
	res, err := c.exec(ctx, c.rdb, s, cmd).StringSlice()
	if err != nil {
		return 0, fmt.Errorf("append logs: %w", err)
	}
	if res[0] == "stale" {
		return 0, ErrLeaseLost
	}
	first, _ := strconv.ParseInt(res[1], 10, 64)
	return first, nil
}

// Logs returns up to limit lines of job id of queue with a seq above
// after, oldest first, and how many lines the job dropped (past the cap).
func (c *Client) Logs(ctx context.Context, queue, id string, after int64, limit int) ([]LogLine, int64, error) {
	k := c.keysFor(queue)
	pipe := c.rdb.Pipeline()
	all := pipe.LRange(ctx, k.log(id), 0, -1)
	dropped := pipe.HGet(ctx, k.job(id), "log_dropped")
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, 0, fmt.Errorf("read logs: %w", err)
	}
	d, _ := strconv.ParseInt(dropped.Val(), 10, 64)
	var out []LogLine
	for _, raw := range all.Val() {
		line, ok := ParseLogLine(raw)
		if !ok || line.Seq <= after {
			continue
		}
		out = append(out, line)
		if len(out) == limit {
			break
		}
	}
	return out, d, nil
}

// ParseLogLine reads a line as lua/log.lua keeps it: "<seq> <attempt>
// <ms> <json>".
func ParseLogLine(raw string) (LogLine, bool) {
	var l LogLine
	parts := strings.SplitN(raw, " ", 4)
	if len(parts) != 4 {
		return l, false
	}
	seq, err1 := strconv.ParseInt(parts[0], 10, 64)
	attempt, err2 := strconv.Atoi(parts[1])
	at, err3 := strconv.ParseInt(parts[2], 10, 64)
	var e LogEntry
	if err1 != nil || err2 != nil || err3 != nil || json.Unmarshal([]byte(parts[3]), &e) != nil {
		return l, false
	}
	return LogLine{Seq: seq, At: job.Time(msTime(at)), Attempt: attempt, Level: e.Level, Message: e.Message, Fields: e.Fields}, true
}
