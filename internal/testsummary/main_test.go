package main

import (
	"strings"
	"testing"
)

// A run with a passing, a failing and a skipped test, a package without
// tests and a build failure.
const run = `{"Action":"start","Package":"a"}
{"Action":"run","Package":"a","Test":"TestOK"}
{"Action":"output","Package":"a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"a","Test":"TestOK","Output":"    a_test.go:9: noise of a passing test\n"}
{"Action":"output","Package":"a","Test":"TestOK","Output":"--- PASS: TestOK (0.00s)\n"}
{"Action":"pass","Package":"a","Test":"TestOK"}
{"Action":"run","Package":"a","Test":"TestNoRedis"}
{"Action":"output","Package":"a","Test":"TestNoRedis","Output":"=== RUN   TestNoRedis\n"}
{"Action":"output","Package":"a","Test":"TestNoRedis","Output":"    redis.go:47: redis-server not found on PATH\n"}
{"Action":"output","Package":"a","Test":"TestNoRedis","Output":"--- SKIP: TestNoRedis (0.00s)\n"}
{"Action":"skip","Package":"a","Test":"TestNoRedis"}
{"Action":"output","Package":"a","Output":"PASS\n"}
{"Action":"output","Package":"a","Output":"ok  \ta\t0.01s\n"}
{"Action":"pass","Package":"a"}
{"Action":"run","Package":"b","Test":"TestBad"}
{"Action":"output","Package":"b","Test":"TestBad","Output":"=== RUN   TestBad\n"}
{"Action":"output","Package":"b","Test":"TestBad","Output":"    b_test.go:5: got 1, want 2\n"}
{"Action":"output","Package":"b","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}
{"Action":"fail","Package":"b","Test":"TestBad"}
{"Action":"output","Package":"b","Output":"FAIL\n"}
{"Action":"output","Package":"b","Output":"FAIL\tb\t0.01s\n"}
{"Action":"fail","Package":"b"}
{"Action":"output","Package":"c","Output":"?   \tc\t[no test files]\n"}
{"Action":"skip","Package":"c"}
{"ImportPath":"d","Action":"build-output","Output":"d/d.go:3:1: syntax error\n"}
{"ImportPath":"d","Action":"build-fail"}
`

func TestSummarize(t *testing.T) {
	var out strings.Builder
	s, err := summarize(strings.NewReader(run), &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"ok  \ta\t0.01s\n",
		"got 1, want 2",
		"FAIL\tb\t0.01s\n",
		"?   \tc\t[no test files]\n",
		"d/d.go:3:1: syntax error",
		"== go test summary: 1 packages ok, 1 failed, 1 without tests; 1 tests passed, 1 failed, 1 skipped\n",
		"   skipped: a TestNoRedis: redis-server not found on PATH\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "noise of a passing test") {
		t.Errorf("a passing test's output is shown:\n%s", got)
	}
	if !s.buildFailed || s.fail != 1 {
		t.Errorf("summary %+v", s)
	}
}
