package queue

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

// scriptNames are the transition scripts of lua/, one Redis function each.
// registryScripts run over the registry of readers, not a queue (format.go).
var registryScripts = []string{"register", "switch"}

// batchScripts run over a batch's keys, in its own slot (batch.go): also
// no begin(), and they share lua/batchlib.lua.
var batchScripts = []string{"batchadd", "batchsettle"}

var scriptNames = []string{"submit", "claim", "extend", "complete", "cycle", "reclaim", "release", "promote", "cancel", "retry", "purge", "prune", "resume", "limit", "forget", "unhandled", "settle", "step", "signal", "log"}

// freesMemory are the scripts that only delete (pruning ended jobs,
// purging dead ones): they run when Redis is out of memory (maxmemory
// reached, no eviction), which is when an operator needs them. Redis
// refuses every other function then, before it writes anything.
var freesMemory = map[string]bool{"prune": true, "purge": true}

// script is one transition script: the function of the library that runs
// it, and the same code as a plain script for servers without functions.
type script struct {
	fn   string        // function name in the library
	eval *redis.Script // EVALSHA fallback
	// fcall is "fcall" and fn, boxed once: the start of every call's
	// command (Client.command).
	fcall [2]any
}

func newScript(fn, evalSrc string) *script {
	return &script{fn: fn, eval: redis.NewScript(evalSrc), fcall: [2]any{"fcall", fn}}
}

// scripts holds every transition script. They are one Redis function
// library (docs/engine.md, "Scripts"): lua/lib.lua and each script's body
// are loaded once per server, so a call runs only its own body, not the
// shared part as well (~6 µs of Redis CPU per call with EVALSHA). Each
// call runs begin() (lib.lua) with its KEYS and ARGV, then the script,
// then writes the events it emitted (flush_events): an early return cannot
// skip them.
type scripts struct {
	submit, claim, extend, complete, cycle, reclaim, release, promote, cancel, retry, purge, prune, resume, limit, forget, unhandled, settle *script
	// step and signal: durable jobs (durable.go); log: job logs (logs.go).
	step, signal, log *script
	// register records a process in the registry of readers (format.go).
	// It is no transition: it runs without begin() and flush_events, over
	// the registry's keys, and also when Redis is out of memory, so that
	// no process loses its registration (and stops) for that alone.
	// switchFormat moves the format marker (format.go), the same way.
	register, switchFormat *script
	// batchAdd and batchSettle run over a batch's keys (batch.go).
	batchAdd, batchSettle *script

	library string // the library's source, FUNCTION LOAD's argument
	name    string // the library's name: "sundial_" + a hash of its source
}

// shared is the Lua every script needs: lib.lua, and complete and claim
// as complete_part and claim_part (cycle.lua calls them).
func shared() string {
	return mustRead("lib.lua") + "\n-- " + strings.Repeat("-", 60) + "\n" +
		"local function complete_part(ARGV)\n" + mustRead("complete.lua") + "\nend\n" +
		"local function claim_part(ARGV)\n" + mustRead("claim.lua") + "\nend\n"
}

// mainOf defines script n as the local function main_<n>.
func mainOf(n string) string {
	return "local function main_" + n + "()\n" + mustRead(n+".lua") + "\nend\n"
}

func loadScripts() *scripts {
	common := shared()
	code := common
	for _, n := range scriptNames {
		code += mainOf(n)
	}
	for _, n := range registryScripts {
		code += mainOf(n) // needs nothing of lib.lua; see below
	}
	code += mustRead("batchlib.lua") + "\n"
	for _, n := range batchScripts {
		code += mainOf(n)
	}
	sum := sha1.Sum([]byte(code))
	name := "sundial_" + hex.EncodeToString(sum[:8])
	var lib strings.Builder
	lib.WriteString("#!lua name=" + name + "\n")
	// KEYS and ARGV are the library's upvalues, set by each call. LIBRARY
	// tells lib.lua that its upvalues outlive a call (false in the plain
	// scripts of the EVALSHA fallback).
	lib.WriteString("local KEYS, ARGV\nlocal LIBRARY = true\n" + code)
	lib.WriteString("local function entry(main)\n  return function(keys, args)\n    KEYS, ARGV = keys, args\n" +
		"    begin()\n    local out = main()\n    flush_events()\n    return out\n  end\nend\n")
	s := &scripts{name: name}
	byName := map[string]*script{}
	for _, n := range scriptNames {
		fn := name + "_" + n
		flags := ""
		if freesMemory[n] {
			flags = "'allow-oom'"
		}
		lib.WriteString(fmt.Sprintf("redis.register_function{function_name='%s', callback=entry(main_%s), flags={%s}}\n", fn, n, flags))
		// The fallback: the same code as one script with only its own
		// main, KEYS and ARGV taken from the globals EVAL sets.
		byName[n] = newScript(fn, "local KEYS, ARGV = KEYS, ARGV\nlocal LIBRARY = false\n"+common+mainOf(n)+
			"begin()\nlocal out = main_"+n+"()\nflush_events()\nreturn out\n")
	}
	// The registry's scripts are more functions of the library, which set
	// KEYS and ARGV themselves; the fallback of each is its file alone.
	for _, n := range registryScripts {
		lib.WriteString(fmt.Sprintf("redis.register_function{function_name='%s_%s', callback=function(keys, args) KEYS, ARGV = keys, args; return main_%s() end, flags={'allow-oom'}}\n", name, n, n))
		byName[n] = newScript(name+"_"+n, "local KEYS, ARGV = KEYS, ARGV\n"+mainOf(n)+"return main_"+n+"()\n")
	}
	s.register, s.switchFormat = byName["register"], byName["switch"]
	// The batch scripts: the same, without allow-oom (they add members),
	// and the fallback of each is batchlib.lua and its file.
	for _, n := range batchScripts {
		lib.WriteString(fmt.Sprintf("redis.register_function{function_name='%s_%s', callback=function(keys, args) KEYS, ARGV = keys, args; return main_%s() end}\n", name, n, n))
		byName[n] = newScript(name+"_"+n, "local KEYS, ARGV = KEYS, ARGV\n"+mustRead("batchlib.lua")+"\n"+mainOf(n)+"return main_"+n+"()\n")
	}
	s.batchAdd, s.batchSettle = byName["batchadd"], byName["batchsettle"]
	s.library = lib.String()
	s.submit, s.claim, s.extend, s.complete, s.cycle = byName["submit"], byName["claim"], byName["extend"], byName["complete"], byName["cycle"]
	s.reclaim, s.release, s.promote, s.cancel, s.retry = byName["reclaim"], byName["release"], byName["promote"], byName["cancel"], byName["retry"]
	s.purge, s.prune, s.resume, s.limit, s.forget = byName["purge"], byName["prune"], byName["resume"], byName["limit"], byName["forget"]
	s.unhandled, s.settle = byName["unhandled"], byName["settle"]
	s.step, s.signal, s.log = byName["step"], byName["signal"], byName["log"]
	return s
}

func mustRead(name string) string {
	b, err := luaFS.ReadFile("lua/" + name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// scripter is what a script call needs of a client or connection.
type scripter interface {
	redis.Scripter
	Process(ctx context.Context, cmd redis.Cmder) error
	FunctionLoad(ctx context.Context, code string) *redis.StringCmd
}

// scriptMode tells how a Client runs the scripts.
type scriptMode struct {
	eval atomic.Bool // the server has no functions (or may not load them): EVALSHA
}

// call runs s over keys with argv on r (a client, or one connection).
// Queue scripts build their command with Client.command and run it with
// exec instead, which saves copying it.
func (c *Client) call(ctx context.Context, r scripter, s *script, keys []string, argv []any) *redis.Cmd {
	cmd := make([]any, 0, 3+len(keys)+len(argv))
	cmd = append(cmd, s.fcall[0], s.fcall[1], len(keys))
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	return c.exec(ctx, r, s, append(cmd, argv...))
}

// exec runs cmd, an FCALL of s (Client.command's layout: "fcall", the
// function, the number of keys, the keys, then ARGV) on r: as a function,
// loading the library where the server lacks it (a new or restarted
// server without persistence, a new cluster master) and calling again. A
// server that cannot load functions (Redis before 7.0, FUNCTION renamed or
// denied) makes this client use EVALSHA from then on. A client whose
// registration as a reader is not live runs nothing (see Register).
func (c *Client) exec(ctx context.Context, r scripter, s *script, cmd []any) *redis.Cmd {
	if s != c.scripts.register {
		if err := c.fence.check(); err != nil {
			rc := redis.NewCmd(ctx)
			rc.SetErr(err)
			return rc
		}
	}
	if c.mode.eval.Load() {
		return evalsha(ctx, r, s, cmd)
	}
	rc := fcall(ctx, r, cmd)
	if err := rc.Err(); err == nil || !isNoFunction(err) {
		return rc
	}
	if err := c.loadLibrary(ctx, r, firstKey(cmd)); err != nil {
		if !cannotLoadFunctions(err) {
			rc.SetErr(fmt.Errorf("load sundial's function library: %w", err))
			return rc
		}
		c.mode.eval.Store(true)
		return evalsha(ctx, r, s, cmd)
	}
	return fcall(ctx, r, cmd)
}

// fcall sends cmd as it is (go-redis' FCall would copy it into a new
// slice), routed on a cluster by its first key, as FCall does.
func fcall(ctx context.Context, r scripter, cmd []any) *redis.Cmd {
	rc := fcallCmd(ctx, cmd)
	_ = r.Process(ctx, rc)
	return rc
}

// fcallCmd makes cmd, an FCALL command, a go-redis command that a cluster
// client routes by the command's first key.
func fcallCmd(ctx context.Context, cmd []any) *redis.Cmd {
	rc := redis.NewCmd(ctx, cmd...)
	if cmd[2].(int) > 0 {
		rc.SetFirstKeyPos(3)
	}
	return rc
}

// firstKey is the first key of an FCALL command, "" when it has none.
func firstKey(cmd []any) string {
	if cmd[2].(int) == 0 {
		return ""
	}
	return cmd[3].(string)
}

// evalsha runs cmd, an FCALL of s, as s's plain script (EVALSHA, or EVAL
// where the server does not have it cached).
func evalsha(ctx context.Context, r scripter, s *script, cmd []any) *redis.Cmd {
	n := cmd[2].(int)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = cmd[3+i].(string)
	}
	return s.eval.Run(ctx, r, keys, cmd[3+n:]...)
}

// loadLibrary loads the function library on the server that holds key:
// on a cluster, the master of key's slot. It never replaces a library of
// the same name (the same source: the name carries its hash): the library
// keeps state between calls (lib.lua's BOOTED, the restart quarantine),
// and loading it again would wipe that and hold every queue it knew
// for a lease TTL. Processes that start together all miss the library;
// the first one loads it and the others find it there.
func (c *Client) loadLibrary(ctx context.Context, r scripter, key string) error {
	var err error
	if cc, ok := r.(*redis.ClusterClient); ok {
		node, nerr := cc.MasterForKey(ctx, key)
		if nerr != nil {
			return nerr
		}
		err = node.FunctionLoad(ctx, c.scripts.library).Err()
	} else {
		err = r.FunctionLoad(ctx, c.scripts.library).Err()
	}
	if isReply(err, "ERR Library '"+c.scripts.name+"' already exists") {
		return nil
	}
	return err
}

// isNoFunction tells the error of an FCALL of a function the server does
// not have, or of FCALL itself missing (before Redis 7.0) or denied.
func isNoFunction(err error) bool {
	return isReply(err, "ERR Function not found", "ERR unknown command", "NOPERM")
}

// cannotLoadFunctions tells the refusals of FUNCTION LOAD that will not
// change: no such command (before Redis 7.0, or renamed), or an ACL that
// denies it.
func cannotLoadFunctions(err error) bool { return isReply(err, "ERR unknown command", "NOPERM") }
