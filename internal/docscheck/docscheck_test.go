package docscheck

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/buildinfo"
	"github.com/sundialhq/sundial/pkg/config"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// root is the repository root, relative to this package.
const root = "../.."

// doc is one documentation file and its text.
type doc struct{ name, text string }

// docs returns README.md and docs/*.md.
func docs(t *testing.T) []doc {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	names = append([]string{filepath.Join(root, "README.md")}, names...)
	var out []doc
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, n)
		out = append(out, doc{rel, string(b)})
	}
	return out
}

// lineOf returns the 1-based line of offset i in s.
func lineOf(s string, i int) int { return strings.Count(s[:i], "\n") + 1 }

// sources walks the repository's code (not its docs, dependencies or build
// output) and calls f with each file's path and text.
func sources(t *testing.T, f func(path, text string)) {
	t.Helper()
	skip := map[string]bool{".git": true, "node_modules": true, "dist": true, ".local": true, "docs": true, "bin": true}
	exts := map[string]bool{".go": true, ".sh": true, ".yml": true, ".yaml": true, ".py": true, ".mjs": true, ".js": true, ".ts": true, ".tsx": true, ".tpl": true, ".json": true}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skip[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		base := d.Name()
		if !exts[filepath.Ext(base)] && base != "Makefile" && base != "Dockerfile" && base != "run" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f(p, string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

var envRe = regexp.MustCompile(`\bSUNDIAL_[A-Z0-9_]*[A-Z0-9]\b`)

// TestEnvironmentVariables: a variable the docs name is read somewhere in
// the code (pkg/config.Vars, the CLI, scripts, tests' knobs), and every
// variable of pkg/config.Vars has its row in docs/configuration.md with the
// same default.
func TestEnvironmentVariables(t *testing.T) {
	known := map[string]bool{}
	for _, v := range config.Vars {
		known[v.Name] = true
	}
	sources(t, func(_, text string) {
		for _, name := range envRe.FindAllString(text, -1) {
			known[name] = true
		}
	})
	for _, d := range docs(t) {
		for _, m := range envRe.FindAllStringIndex(d.text, -1) {
			if name := d.text[m[0]:m[1]]; !known[name] {
				t.Errorf("%s:%d names %s, which no code reads", d.name, lineOf(d.text, m[0]), name)
			}
		}
	}

	b, err := os.ReadFile(filepath.Join(root, "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // variable → documented default
	for _, m := range regexp.MustCompile("(?m)^\\| `(SUNDIAL_[A-Z0-9_]+)` \\| ([^|]*) \\|").FindAllStringSubmatch(string(b), -1) {
		rows[m[1]] = strings.Trim(strings.TrimSpace(m[2]), "`")
	}
	for _, v := range config.Vars {
		got, ok := rows[v.Name]
		want := v.Default
		if want == "" {
			want = "(empty)"
		}
		switch {
		case !ok:
			t.Errorf("docs/configuration.md has no row for %s", v.Name)
		case got != want:
			t.Errorf("docs/configuration.md: %s defaults to %q, the code to %q", v.Name, got, want)
		}
	}
	for name := range rows {
		if !slices.ContainsFunc(config.Vars, func(v config.Var) bool { return v.Name == name }) {
			t.Errorf("docs/configuration.md has a row for %s, which is not in pkg/config.Vars", name)
		}
	}
}

// route is a route of the API's table.
type route struct{ method, path string }

// routes reads the route table through the OpenAPI document the API serves,
// which is generated from the table (pkg/httpapi's golden test keeps the
// file in step).
func routes(t *testing.T) []route {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "pkg", "httpapi", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var out []route
	for p, ops := range doc.Paths {
		for m := range ops {
			out = append(out, route{strings.ToUpper(m), p})
		}
	}
	if len(out) < 10 {
		t.Fatalf("only %d routes in openapi.json", len(out))
	}
	return out
}

// matchPath reports whether a documented path matches a route's path:
// segments in braces, and segments the docs elide ("01KB…", "…"), match
// any segment.
func matchPath(documented, route string) bool {
	ds, rs := strings.Split(documented, "/"), strings.Split(route, "/")
	if len(ds) != len(rs) {
		return false
	}
	for i := range ds {
		param := strings.HasPrefix(rs[i], "{")
		switch {
		case ds[i] == rs[i]:
		case param && (strings.HasPrefix(ds[i], "{") || strings.Contains(ds[i], "…") || ds[i] != ""):
		default:
			return false
		}
	}
	return true
}

var (
	// "GET /v1/jobs/{id}" in tables and prose.
	methodPathRe = regexp.MustCompile(`\b(GET|POST|PUT|PATCH|DELETE) (/[A-Za-z0-9_{}./…:-]*)`)
	// a URL path of the API, e.g. in a curl line: localhost:8080/v1/jobs/01KB…
	urlPathRe = regexp.MustCompile(`(?:localhost|127\.0\.0\.1):\d+(/v1/[A-Za-z0-9_{}./…-]*)`)
)

// TestRoutes: every route the docs name is in the route table, and every
// route of the table is documented with its method.
func TestRoutes(t *testing.T) {
	table := routes(t)
	documented := map[route]bool{}
	for _, d := range docs(t) {
		for _, m := range methodPathRe.FindAllStringSubmatchIndex(d.text, -1) {
			method, path := d.text[m[2]:m[3]], strings.TrimRight(d.text[m[4]:m[5]], ".:")
			found := false
			for _, r := range table {
				if r.method == method && matchPath(path, r.path) {
					documented[r], found = true, true
				}
			}
			if !found {
				t.Errorf("%s:%d names %s %s, which is not in the API's route table", d.name, lineOf(d.text, m[0]), method, path)
			}
		}
		for _, m := range urlPathRe.FindAllStringSubmatchIndex(d.text, -1) {
			path := strings.TrimRight(d.text[m[2]:m[3]], ".")
			if !slices.ContainsFunc(table, func(r route) bool { return matchPath(path, r.path) }) {
				t.Errorf("%s:%d uses the URL path %s, which is not in the API's route table", d.name, lineOf(d.text, m[0]), path)
			}
		}
	}
	for _, r := range table {
		if !documented[r] {
			t.Errorf("route %s %s is in no doc (docs/api.md lists the routes)", r.method, r.path)
		}
	}
}

// cliCommands runs "sundial help" and returns each command with its
// subcommands (none for a command without).
func cliCommands(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "run", "./cmd/sundial", "help")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sundial help: %v\n%s", err, out)
	}
	cmds := map[string][]string{}
	inList := false
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case line == "Commands:":
			inList = true
			continue
		case !inList:
			continue
		case !strings.HasPrefix(line, "  "):
			inList = false
			continue
		}
		f := strings.Fields(line)
		var subs []string
		if len(f) > 1 && strings.Contains(f[1], "|") {
			subs = strings.Split(f[1], "|")
		}
		cmds[f[0]] = subs
	}
	if len(cmds) < 3 {
		t.Fatalf("no commands in sundial help:\n%s", out)
	}
	return cmds
}

// A command line in the docs: "sundial jobs get", "$ sundial watch",
// ".local/bin/sundial queues", "`sundial schedules info`".
var cliRe = regexp.MustCompile("(?m)(?:^|\\$ |bin/|`)sundial ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?")

// TestCLICommands: every command the docs run is a command of the CLI (and
// its subcommand one of that command's), and docs/cli.md shows every
// command and subcommand.
func TestCLICommands(t *testing.T) {
	cmds := cliCommands(t)
	seen := map[string]bool{}
	for _, d := range docs(t) {
		for _, m := range cliRe.FindAllStringSubmatchIndex(d.text, -1) {
			name := d.text[m[2]:m[3]]
			subs, ok := cmds[name]
			if !ok {
				t.Errorf("%s:%d runs sundial %s, which is not a command of the CLI", d.name, lineOf(d.text, m[0]), name)
				continue
			}
			inCLIDoc := d.name == filepath.Join("docs", "cli.md")
			seen[name] = seen[name] || inCLIDoc
			if m[4] >= 0 && len(subs) > 0 {
				sub := d.text[m[4]:m[5]]
				if !slices.Contains(subs, sub) {
					t.Errorf("%s:%d runs sundial %s %s, which is not a subcommand (%s)", d.name, lineOf(d.text, m[0]), name, sub, strings.Join(subs, ", "))
				}
				seen[name+" "+sub] = seen[name+" "+sub] || inCLIDoc
			}
		}
	}
	for name, subs := range cmds {
		if name == "help" {
			continue
		}
		if !seen[name] {
			t.Errorf("docs/cli.md does not show sundial %s", name)
		}
		for _, s := range subs {
			if !seen[name+" "+s] {
				t.Errorf("docs/cli.md does not show sundial %s %s", name, s)
			}
		}
	}
}

// A repository path the docs name: a top-level directory of the repository
// followed by more path, or a file at the root.
var pathRe = regexp.MustCompile(`\b((?:cmd|pkg|services|internal|tools|web|deploy|docs|scripts|examples)/[A-Za-z0-9_./*-]*[A-Za-z0-9_*/]|docker-compose\.yml|Dockerfile|Makefile|STRUCTURE\.md|CHANGELOG\.md)`)

// TestPaths: every file or directory of this repository the docs name
// exists (globs and "…" allowed).
func TestPaths(t *testing.T) {
	for _, d := range docs(t) {
		for _, m := range pathRe.FindAllStringSubmatchIndex(d.text, -1) {
			p := d.text[m[2]:m[3]]
			// Skip URLs, Go import paths and paths inside other trees
			// ("/v1/…", "github.com/…/pkg/…", "web/src" is fine).
			if m[2] > 0 && strings.ContainsAny(d.text[m[2]-1:m[2]], "/.:@-_") {
				continue
			}
			if matches, _ := filepath.Glob(filepath.Join(root, p)); len(matches) == 0 {
				t.Errorf("%s:%d names %s, which does not exist", d.name, lineOf(d.text, m[0]), p)
			}
		}
	}
}

// TestReadmeGoProgram runs the README's Go program (the first go block
// under "## From Go") against a private redis-server, as a new user would
// run it against theirs, and checks what it prints.
func TestReadmeGoProgram(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i := strings.Index(readme, "\n## From Go\n")
	if i < 0 {
		t.Fatal(`README.md has no "## From Go" section`)
	}
	m := regexp.MustCompile("(?s)```go\n(.*?)```").FindStringSubmatch(readme[i:])
	if m == nil {
		t.Fatal("README.md: no go block under ## From Go")
	}
	const addr = "127.0.0.1:6379"
	if !strings.Contains(m[1], addr) {
		t.Fatalf("the README's program does not use %s any more; update this test", addr)
	}
	srv := queuetest.Start(t)
	dir := t.TempDir()
	prog := filepath.Join(dir, "main.go")
	if err := os.WriteFile(prog, []byte(strings.ReplaceAll(m[1], addr, srv.Addr())), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", prog)
	cmd.Dir = root // in the module, so that it builds against this tree
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go run README program: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if got, want := strings.TrimSpace(stdout.String()), `succeeded "hello Ada"`; got != want {
		t.Fatalf("README program printed %q, want %q (the README says so)", got, want)
	}
}

// TestTimesInDocs: the times the docs show in answers have the API's one
// format, RFC 3339 with milliseconds in UTC (job.TimeLayout).
func TestTimesInDocs(t *testing.T) {
	quoted := regexp.MustCompile(`"(\d{4}-\d\d-\d\dT[^"]*)"`)
	format := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
	for _, d := range docs(t) {
		for _, m := range quoted.FindAllStringSubmatchIndex(d.text, -1) {
			if s := d.text[m[2]:m[3]]; !format.MatchString(s) {
				t.Errorf("%s:%d shows the time %q; the API writes 2006-01-02T15:04:05.000Z", d.name, lineOf(d.text, m[0]), s)
			}
		}
	}
}

// A default given in prose next to a variable: "`SUNDIAL_LEASE_TTL` (15 s)",
// "(default 0)", "(10,000 per queue)", "(1 MiB)", "(90 days)".
var proseDefaultRe = regexp.MustCompile("`(SUNDIAL_[A-Z0-9_]+)` \\((?:default )?(\\d[\\d,.]*)(?: (s|min|h|days|MiB))?\\b")

// TestDefaultsInProse: a default the docs state next to a variable outside
// the configuration table is the code's default too.
func TestDefaultsInProse(t *testing.T) {
	defaults := map[string]string{}
	for _, v := range config.Vars {
		defaults[v.Name] = v.Default
	}
	for _, d := range docs(t) {
		for _, m := range proseDefaultRe.FindAllStringSubmatchIndex(d.text, -1) {
			name, num := d.text[m[2]:m[3]], strings.ReplaceAll(d.text[m[4]:m[5]], ",", "")
			unit := ""
			if m[6] >= 0 {
				unit = d.text[m[6]:m[7]]
			}
			def, ok := defaults[name]
			if !ok {
				continue
			}
			var doc, code string
			switch unit {
			case "s", "min", "h", "days":
				n, _ := strconv.ParseFloat(num, 64)
				scale := map[string]time.Duration{"s": time.Second, "min": time.Minute, "h": time.Hour, "days": 24 * time.Hour}[unit]
				dd, err := time.ParseDuration(def)
				if err != nil {
					continue
				}
				doc, code = (time.Duration(n * float64(scale))).String(), dd.String()
			case "MiB":
				n, _ := strconv.ParseFloat(num, 64)
				doc, code = strconv.FormatInt(int64(n*(1<<20)), 10), def
			default:
				doc, code = num, def
			}
			if doc != code {
				t.Errorf("%s:%d gives %s a default of %s %s; the code's is %s", d.name, lineOf(d.text, m[0]), name, num, unit, def)
			}
		}
	}
}

// metricDeclRe finds where the code names a series: a collector's Name, a
// NewDesc, or the worker's count helper.
var metricDeclRe = regexp.MustCompile(`(?:Name:\s*|NewDesc\(|count\()"(sundial_[a-z0-9_]+)"`)

// TestMetricsReference: every series the code declares has its row in
// docs/metrics.md, and every row there names a series the code declares.
func TestMetricsReference(t *testing.T) {
	declared := map[string]bool{}
	sources(t, func(p, text string) {
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			for _, m := range metricDeclRe.FindAllStringSubmatch(text, -1) {
				declared[m[1]] = true
			}
		}
	})
	if len(declared) < 30 {
		t.Fatalf("found %d series in the code; the pattern no longer matches how series are declared", len(declared))
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(sundial_[a-z0-9_]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		rows[m[1]] = true
	}
	for name := range declared {
		if !rows[name] {
			t.Errorf("docs/metrics.md has no row for %s", name)
		}
	}
	for name := range rows {
		if !declared[name] {
			t.Errorf("docs/metrics.md lists %s, which the code does not declare", name)
		}
	}
}

// TestVersionAgreesEverywhere: the release of internal/buildinfo (what
// every binary prints and the API answers) is CHANGELOG.md's newest
// released section, the Helm chart's appVersion and the compose file's
// image tag.
func TestVersionAgreesEverywhere(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	v := buildinfo.Version
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(v) {
		t.Fatalf("buildinfo.Version %q is not a release version (x.y.z)", v)
	}
	if m := regexp.MustCompile(`(?m)^## (\d+\.\d+\.\d+)\b`).FindStringSubmatch(read("CHANGELOG.md")); m == nil || m[1] != v {
		t.Errorf("CHANGELOG.md's newest released section is %v, the binaries say %s", m, v)
	}
	if m := regexp.MustCompile(`(?m)^appVersion: "?([^"\n]+)"?$`).FindStringSubmatch(read("deploy/helm/sundial/Chart.yaml")); m == nil || m[1] != v {
		t.Errorf("the chart's appVersion is %v, the binaries say %s", m, v)
	}
	if !strings.Contains(read("docker-compose.yml"), "${SUNDIAL_IMAGE:-sundial:"+v+"}") {
		t.Errorf("docker-compose.yml does not tag the image sundial:%s", v)
	}
}
