package queue

import (
	"regexp"
	"slices"
	"testing"
)

// localFuncRe finds the functions a Lua file declares at its top level.
var localFuncRe = regexp.MustCompile(`(?m)^local function ([A-Za-z_][A-Za-z0-9_]*)`)

// Every script shares lib.lua (one Lua chunk in the function library): a
// second "local function f" in it would shadow the first for the code
// after it, and a script calling the first would call the second (it
// happened: a durable job's park shadowed the limits' park). No name of
// lib.lua is declared twice, nor again by a script.
func TestLuaFunctionNamesAreUnique(t *testing.T) {
	lib := map[string]bool{}
	for _, m := range localFuncRe.FindAllStringSubmatch(mustRead("lib.lua"), -1) {
		if lib[m[1]] {
			t.Errorf("local function %s is declared twice in lib.lua", m[1])
		}
		lib[m[1]] = true
	}
	if len(lib) < 50 {
		t.Fatalf("found %d functions in lib.lua; the pattern no longer matches", len(lib))
	}
	for _, n := range slices.Concat(scriptNames, registryScripts, batchScripts) {
		for _, m := range localFuncRe.FindAllStringSubmatch(mustRead(n+".lua"), -1) {
			if lib[m[1]] {
				t.Errorf("%s.lua declares %s, a function of lib.lua", n, m[1])
			}
		}
	}
}
