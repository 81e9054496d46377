// Command testsummary turns the output of `go test -json` (on stdin) into
// what make test shows: each package's result line as go test prints it,
// the output of failed tests, and a summary that counts packages and tests
// — passed, failed and skipped — and names every skipped test with its
// reason, so that no test is skipped silently. It exits 1 when a test or a
// build failed.
//
//	go test -json ./... | go run ./internal/testsummary [-summary FILE]
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output, build-fail
	Test       string
	Output     string
}

// summary is what one run amounts to.
type summary struct {
	pkgOK, pkgFail, pkgNoTests int
	pass, fail, skip           int
	skipped                    []string // "pkg Test: reason"
	buildFailed                bool
}

func main() {
	to := flag.String("summary", "", "write the summary to this `file` instead of the end of stdout")
	flag.Parse()
	var sum strings.Builder
	s, err := summarize(os.Stdin, os.Stdout, &sum)
	if err == nil && *to != "" {
		err = os.WriteFile(*to, []byte(sum.String()), 0o644)
	} else if err == nil {
		_, err = fmt.Print(sum.String())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if s.fail > 0 || s.pkgFail > 0 || s.buildFailed {
		os.Exit(1)
	}
}

// summarize reads events from r, writes what happens to w as it comes, and
// the summary to sum at the end.
func summarize(r io.Reader, w, sum io.Writer) (*summary, error) {
	s := &summary{}
	out := map[string]*strings.Builder{} // "pkg\x00test" → output so far
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(w, "%s\n", line) // not from test2json (e.g. vet or a build error)
			continue
		}
		key := e.Package + "\x00" + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(w, e.Output)
		case e.Action == "build-fail":
			s.buildFailed = true
		case e.Test == "" && e.Action == "output":
			// Package-level lines: "ok  pkg 1.2s", "FAIL pkg", "? pkg [no test files]",
			// panics outside tests. The "PASS"/"FAIL" verdict line of -v is noise.
			if t := strings.TrimSpace(e.Output); t != "PASS" && t != "FAIL" && !strings.HasPrefix(t, "=== ") {
				fmt.Fprint(w, e.Output)
			}
		case e.Test == "":
			switch e.Action {
			case "pass":
				s.pkgOK++
			case "fail":
				s.pkgFail++
			case "skip":
				s.pkgNoTests++
			}
		case e.Action == "output":
			b := out[key]
			if b == nil {
				b = &strings.Builder{}
				out[key] = b
			}
			b.WriteString(e.Output)
		case e.Action == "pass":
			s.pass++
			delete(out, key)
		case e.Action == "fail":
			s.fail++
			if b := out[key]; b != nil {
				fmt.Fprint(w, b.String())
			}
			delete(out, key)
		case e.Action == "skip":
			s.skip++
			s.skipped = append(s.skipped, e.Package+" "+e.Test+": "+skipReason(out[key]))
			delete(out, key)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	fmt.Fprintf(sum, "== go test summary: %d packages ok, %d failed, %d without tests; %d tests passed, %d failed, %d skipped\n",
		s.pkgOK, s.pkgFail, s.pkgNoTests, s.pass, s.fail, s.skip)
	sort.Strings(s.skipped)
	for _, sk := range s.skipped {
		fmt.Fprintln(sum, "   skipped:", sk)
	}
	return s, nil
}

// skipReason picks the reason out of a skipped test's output: the lines
// between "=== RUN" and "--- SKIP", without the file:line prefix.
func skipReason(b *strings.Builder) string {
	if b == nil {
		return "(no reason given)"
	}
	var lines []string
	for _, l := range strings.Split(b.String(), "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		if _, rest, ok := strings.Cut(t, ".go:"); ok {
			if _, msg, ok := strings.Cut(rest, ": "); ok {
				t = msg
			}
		}
		lines = append(lines, t)
	}
	if len(lines) == 0 {
		return "(no reason given)"
	}
	return strings.Join(lines, "; ")
}
