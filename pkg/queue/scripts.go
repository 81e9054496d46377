package queue

import (
	"embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

// scripts holds every transition script, each prefixed with lua/lib.lua
// and run as a function, after which the events it emitted are written
// (flush_events in lib.lua): an early return cannot skip them.
type scripts struct {
	submit, claim, extend, complete, cycle, reclaim, release, promote, cancel, retry, purge, prune, resume, limit *redis.Script
}

func loadScripts() *scripts {
	lib := mustRead("lib.lua")
	// parts are scripts other scripts call as functions (cycle.lua).
	parts := "local function complete_part(ARGV)\n" + mustRead("complete.lua") + "\nend\n" +
		"local function claim_part(ARGV)\n" + mustRead("claim.lua") + "\nend\n"
	mk := func(name string) *redis.Script {
		pre := ""
		if name == "cycle.lua" {
			pre = parts
		}
		return redis.NewScript(lib + "\n-- " + strings.Repeat("-", 60) + "\n" + pre + "local function main()\n" +
			mustRead(name) + "\nend\nlocal out = main()\nflush_events()\nreturn out\n")
	}
	return &scripts{
		submit:   mk("submit.lua"),
		claim:    mk("claim.lua"),
		extend:   mk("extend.lua"),
		complete: mk("complete.lua"),
		cycle:    mk("cycle.lua"),
		reclaim:  mk("reclaim.lua"),
		release:  mk("release.lua"),
		promote:  mk("promote.lua"),
		cancel:   mk("cancel.lua"),
		retry:    mk("retry.lua"),
		purge:    mk("purge.lua"),
		prune:    mk("prune.lua"),
		resume:   mk("resume.lua"),
		limit:    mk("limit.lua"),
	}
}

func (s *scripts) all() []*redis.Script {
	return []*redis.Script{s.submit, s.claim, s.extend, s.complete, s.cycle, s.reclaim, s.release, s.promote, s.cancel, s.retry, s.purge, s.prune, s.resume, s.limit}
}

func mustRead(name string) string {
	b, err := luaFS.ReadFile("lua/" + name)
	if err != nil {
		panic(err)
	}
	return string(b)
}
