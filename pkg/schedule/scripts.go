package schedule

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

// The scripts of lua/; each file's header names its KEYS, ARGV and result.
var (
	scriptPlan    = mustScript("plan.lua")
	scriptAdvance = mustScript("advance.lua")
	scriptDue     = mustScript("due.lua")
	scriptRenew   = mustScript("renew.lua")
	scriptRelease = mustScript("release.lua")
)

func mustScript(name string) *redis.Script {
	b, err := luaFS.ReadFile("lua/" + name)
	if err != nil {
		panic(err)
	}
	return redis.NewScript(string(b))
}
