//go:build sdktest

package sdktest

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	proctest.Cleanup()
	os.Exit(code)
}

// root is the repository root, relative to this package.
const root = "../.."

// adminKey is the API key the SDK suites use (every scope).
const adminKey = "sdk-test-admin-key"

// startStack runs an API and a poller over a private redis-server, with
// one-second leases so that the suites see leases expire quickly, and
// returns the API's base URL. The API's rate limit is off: a worker
// draining 2,000 no-op jobs sends more than the default 1000 requests a
// second under one key, and a 429's one-second Retry-After is a whole
// lease here (the suites test 429 handling against a scripted server).
func startStack(t *testing.T) string {
	base, _ := startStacks(t, false)
	return base
}

// startStacks is startStack, and with longLease a second API over the same
// Redis whose leases last 5 s (its base URL the second result): a lease
// margin (a fifth) long enough for a handler's cleanup, for the shutdown
// tests that check a lease goes back only once its handler returned.
func startStacks(t *testing.T, longLease bool) (string, string) {
	t.Helper()
	srv := queuetest.Start(t)
	addr := proctest.FreeAddr(t)
	env := stackEnv(srv, addr)
	proctest.Start(t, proctest.Binary(t, "api"), env...)
	proctest.Start(t, proctest.Binary(t, "poller"), env...)
	base := "http://" + addr
	queuetest.Eventually(t, 30*time.Second, "the API", func() bool { return proctest.Ready(http.DefaultClient, base) })
	if !longLease {
		return base, ""
	}
	longAddr := proctest.FreeAddr(t)
	long := append(env[:len(env):len(env)], "SUNDIAL_LEASE_TTL=5s", "SUNDIAL_HTTP_ADDR="+longAddr)
	proctest.Start(t, proctest.Binary(t, "api"), long...)
	longBase := "http://" + longAddr
	queuetest.Eventually(t, 30*time.Second, "the API with 5 s leases", func() bool { return proctest.Ready(http.DefaultClient, longBase) })
	return base, longBase
}

// stackEnv is the environment of the test stack's API and poller over
// srv, the API listening on addr.
func stackEnv(srv *queuetest.Server, addr string) []string {
	return []string{
		"SUNDIAL_REDIS_URL=" + srv.URL(),
		"SUNDIAL_LOG_LEVEL=warn",
		"SUNDIAL_LEASE_TTL=1s",
		"SUNDIAL_LEASE_GRACE=200ms",
		"SUNDIAL_HEARTBEAT_INTERVAL=200ms",
		"SUNDIAL_METRICS_ADDR=127.0.0.1:0",
		"SUNDIAL_HISTORY=off",
		"SUNDIAL_HTTP_ADDR=" + addr,
		"SUNDIAL_API_KEYS=" + adminKey,
		"SUNDIAL_RATE_LIMIT=0",
	}
}

// run runs a command of a suite, its output in the test's log, and fails
// the test when it exits non-zero.
func run(t *testing.T, ctx context.Context, dir string, env []string, argv ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("$ %v (in %s, %.1f s)\n%s", argv, dir, time.Since(start).Seconds(), out.String())
	if err != nil {
		t.Fatalf("%v: %v", argv, err)
	}
}

// pythons returns the Python 3s here that can make a virtual environment
// (venv and ensurepip): Debian's /usr/bin/python3, as
// scripts/install-deps.sh installs it, then python3 on PATH (a pyenv, say),
// each once. The package needs no setuptools or wheel to build
// (sdk/python/_build/backend.py).
func pythons(t *testing.T) []string {
	t.Helper()
	var out []string
	seen := map[string]bool{}
	for _, p := range []string{os.Getenv("SUNDIAL_PYTHON"), "/usr/bin/python3", "python3"} {
		if p == "" {
			continue
		}
		real, err := exec.Command(p, "-c", "import sys, venv, ensurepip; print(sys.executable)").Output()
		if err == nil && !seen[string(real)] {
			seen[string(real)] = true
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatal("no python3 with venv and ensurepip: apt-get install python3-venv python3-pip (scripts/install-deps.sh)")
	}
	return out
}

// python returns the first of pythons.
func python(t *testing.T) string { return pythons(t)[0] }

// TestPythonSDKInstallsOnEveryPython installs sdk/python as docs/sdk-python.md
// says (a venv, pip without build isolation or an index) with every Python
// here: a pyenv 3.11 whose setuptools is 65.5 and has no wheel package
// failed with "invalid command 'bdist_wheel'" under setuptools' backend.
func TestPythonSDKInstallsOnEveryPython(t *testing.T) {
	src, _ := filepath.Abs(filepath.Join(root, "sdk", "python"))
	for i, py := range pythons(t) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		dir := t.TempDir()
		venv := filepath.Join(dir, "v"+strconv.Itoa(i))
		run(t, ctx, dir, nil, py, "-m", "venv", "--system-site-packages", venv)
		run(t, ctx, dir, nil, filepath.Join(venv, "bin", "pip"), "install", "--no-build-isolation", "--no-index", "--quiet", src)
		run(t, ctx, dir, nil, filepath.Join(venv, "bin", "python"), "-c",
			"import sundial, importlib.metadata as m; assert sundial.__file__.startswith(r'"+venv+"'), sundial.__file__; print(m.version('sundial-sdk'))")
		cancel()
	}
}

// TestPythonSDK installs sdk/python into a fresh virtual environment the
// way docs/sdks.md says (pip, no build isolation, no index) and runs its
// unittest suite there, outside the source tree so that the installed
// package is the one imported.
func TestPythonSDK(t *testing.T) {
	py := python(t)
	base, longBase := startStacks(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	src, _ := filepath.Abs(filepath.Join(root, "sdk", "python"))
	venv := filepath.Join(dir, "v")
	run(t, ctx, dir, nil, py, "-m", "venv", "--system-site-packages", venv)
	run(t, ctx, dir, nil, filepath.Join(venv, "bin", "pip"), "install", "--no-build-isolation", "--no-index", "--quiet", src)
	tests := filepath.Join(src, "tests")
	run(t, ctx, dir, []string{"SUNDIAL_URL=" + base, "SUNDIAL_LONG_LEASE_URL=" + longBase, "SUNDIAL_API_KEY=" + adminKey, "PYTHONDONTWRITEBYTECODE=1"},
		filepath.Join(venv, "bin", "python"), "-m", "unittest", "discover", "-v", "-s", tests, "-t", tests)
}

// TestTypeScriptSDK builds sdk/typescript with tsc and runs its node --test
// suite (which also checks that src/openapi.ts is what openapi-typescript
// makes of pkg/httpapi/openapi.json). make test-sdk runs npm ci first.
func TestTypeScriptSDK(t *testing.T) {
	node, npm := proctest.NeedTool(t, "node"), proctest.NeedTool(t, "npm")
	dir, _ := filepath.Abs(filepath.Join(root, "sdk", "typescript"))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err != nil {
		t.Fatalf("sdk/typescript has no node_modules: run npm ci there (make test-sdk does)")
	}
	base, longBase := startStacks(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run(t, ctx, dir, nil, node, "--version")
	run(t, ctx, dir, nil, npm, "run", "--silent", "build")
	run(t, ctx, dir, []string{"SUNDIAL_URL=" + base, "SUNDIAL_LONG_LEASE_URL=" + longBase, "SUNDIAL_API_KEY=" + adminKey}, npm, "test")
}

// TestSDKThroughput measures each SDK's worker over HTTP: a few thousand
// no-op jobs at concurrency 8 and 64 against the API, a poller and a
// redis-server on loopback (sdk/python/tests/bench_worker.py,
// sdk/typescript/test/bench.ts). Opt-in, not in CI:
//
//	SUNDIAL_SDK_BENCH=1 go test -tags sdktest -run TestSDKThroughput -v ./internal/sdktest
//
// SUNDIAL_SDK_BENCH_JOBS sets the number of jobs (4000). The API's rate
// limit is off (startStack): at these rates one key's claims and completes
// pass the default 1000 requests a second. The numbers are in docs/sdks.md.
func TestSDKThroughput(t *testing.T) {
	if os.Getenv("SUNDIAL_SDK_BENCH") == "" {
		t.Skip("set SUNDIAL_SDK_BENCH=1 to measure the SDK workers' throughput")
	}
	jobs := os.Getenv("SUNDIAL_SDK_BENCH_JOBS")
	if jobs == "" {
		jobs = "4000"
	}
	py := python(t)
	node, npm := proctest.NeedTool(t, "node"), proctest.NeedTool(t, "npm")
	base := startStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := []string{"SUNDIAL_URL=" + base, "SUNDIAL_API_KEY=" + adminKey, "PYTHONDONTWRITEBYTECODE=1"}
	src, _ := filepath.Abs(filepath.Join(root, "sdk", "python"))
	run(t, ctx, filepath.Join(src, "tests"), append(env, "PYTHONPATH="+src), py, "bench_worker.py", jobs, "8", "64")
	ts, _ := filepath.Abs(filepath.Join(root, "sdk", "typescript"))
	run(t, ctx, ts, nil, npm, "run", "--silent", "pretest")
	run(t, ctx, ts, env, node, filepath.Join("build", "test", "bench.js"), jobs, "8", "64")
}
