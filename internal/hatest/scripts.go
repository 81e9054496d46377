package hatest

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ScriptLog is a go-redis hook that records every script a client runs
// (EVALSHA and EVAL by SHA1, FCALL by function name), for tests that must
// run every script.
type ScriptLog struct {
	mu   sync.Mutex
	seen map[string]bool
}

// Seen returns how many distinct scripts ran.
func (l *ScriptLog) Seen() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

// Ran reports whether the script with body src ran.
func (l *ScriptLog) Ran(src string) bool {
	h := sha1.Sum([]byte(src))
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[hex.EncodeToString(h[:])]
}

// DialHook implements redis.Hook.
func (l *ScriptLog) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (l *ScriptLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.note(cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (l *ScriptLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			l.note(c)
		}
		return next(ctx, cmds)
	}
}

func (l *ScriptLog) note(cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) < 2 {
		return
	}
	name, _ := args[0].(string)
	body, _ := args[1].(string)
	var sha string
	switch strings.ToLower(name) {
	case "evalsha", "evalsha_ro":
		sha = body
	case "eval", "eval_ro":
		h := sha1.Sum([]byte(body))
		sha = hex.EncodeToString(h[:])
	case "fcall", "fcall_ro":
		sha = body // the function's name
	default:
		return
	}
	l.mu.Lock()
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	l.seen[sha] = true
	l.mu.Unlock()
}
