//go:build sdktest

package sdktest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial"
	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/envelope"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// TestEncryptionAcrossLanguages encrypts payloads in Python (submitted over
// REST), handles them in Go (a Runner in this test, and the services/worker
// binary with SUNDIAL_KEYRING running sundial.echo), and reads the results
// in TypeScript, decrypting them there; the keys rotate on the way (Python
// holds k1 only, Go and TypeScript k1 and k2, k2 primary). A marker in the
// payload must not show in Redis (every key, dumped and read), the API's
// answers, the websocket stream or the processes' logs. It then runs each
// SDK's own encryption tests against the same stack.
func TestEncryptionAcrossLanguages(t *testing.T) {
	py := python(t)
	node, npm := proctest.NeedTool(t, "node"), proctest.NeedTool(t, "npm")
	tsDir, _ := filepath.Abs(filepath.Join(root, "sdk", "typescript"))
	if _, err := os.Stat(filepath.Join(tsDir, "node_modules", ".package-lock.json")); err != nil {
		t.Fatalf("sdk/typescript has no node_modules: run npm ci there (make test-sdk does)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	srv := queuetest.Start(t)
	addr := proctest.FreeAddr(t)
	env := append(stackEnv(srv, addr), "SUNDIAL_LOG_LEVEL=debug")
	api := proctest.Start(t, proctest.Binary(t, "api"), env...)
	poller := proctest.Start(t, proctest.Binary(t, "poller"), env...)
	base := "http://" + addr
	queuetest.Eventually(t, 30*time.Second, "the API", func() bool { return proctest.Ready(http.DefaultClient, base) })

	key := func() string {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	k1, k2 := key(), key()
	oldRing := "k1:" + k1
	rotated := "k1:" + k1 + ",k2:" + k2
	marker := "MARKER-" + queuetest.Name("x")
	checkQ, echoQ := queuetest.Name("xlang"), queuetest.Name("xlang-echo")
	sdkEnv := []string{"SUNDIAL_URL=" + base, "SUNDIAL_API_KEY=" + adminKey, "PYTHONDONTWRITEBYTECODE=1"}

	// The websocket stream, recorded from before the first submit.
	stream := recordStream(t, ctx, base)

	// Go: a Runner with the rotated keyring, and the worker binary with it.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	kr, err := sundial.ParseKeyring(rotated, "")
	if err != nil {
		t.Fatal(err)
	}
	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: []string{checkQ}, ExternalPoller: true, LeaseTTL: time.Second,
		LeaseGrace: 200 * time.Millisecond, Encryption: sundial.Encryption{Keyring: kr}})
	type check struct {
		SSN  string `json:"ssn"`
		Lang string `json:"lang"`
		Fail bool   `json:"fail"`
	}
	sundial.HandleJSON(r, "xlang.check", func(ctx context.Context, c check) (any, error) {
		if c.Fail {
			return nil, fmt.Errorf("declined %s", c.SSN)
		}
		return map[string]string{"upper": strings.ToUpper(c.SSN), "from": c.Lang, "by": "go"}, nil
	})
	rctx, stopRunner := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- r.Run(rctx) }()
	defer func() {
		stopRunner()
		if err := <-runDone; err != nil {
			t.Errorf("Runner: %v", err)
		}
	}()
	worker := proctest.Start(t, proctest.Binary(t, "worker"), append(env, "SUNDIAL_QUEUES="+echoQ, "SUNDIAL_KEYRING="+rotated)...)

	// Python: encrypt and submit over REST with k1 only.
	dir := t.TempDir()
	pySrc, _ := filepath.Abs(filepath.Join(root, "sdk", "python"))
	venv := filepath.Join(dir, "v")
	run(t, ctx, dir, nil, py, "-m", "venv", "--system-site-packages", venv)
	run(t, ctx, dir, nil, filepath.Join(venv, "bin", "pip"), "install", "--no-build-isolation", "--no-index", "--quiet", pySrc)
	vpy := filepath.Join(venv, "bin", "python")
	script, _ := filepath.Abs(filepath.Join("testdata", "xlang_submit.py"))
	submitted := output(t, ctx, dir, append(sdkEnv, "SUNDIAL_KEYRING="+oldRing), vpy, script, marker, checkQ, echoQ)
	var ids struct {
		OK, Fail, Echo string
		Payload        json.RawMessage
	}
	if err := json.Unmarshal(submitted, &ids); err != nil {
		t.Fatalf("the Python submit printed %s: %v", submitted, err)
	}
	if kid, ok := envelope.KeyID(ids.Payload); !ok || kid != "k1" || bytes.Contains(ids.Payload, []byte(marker)) {
		t.Fatalf("the API answered the Python submit with payload %s", ids.Payload)
	}
	c := sundial.NewClient(rdb)
	for _, id := range []string{ids.OK, ids.Fail, ids.Echo} {
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		j, err := c.Wait(wctx, id)
		wcancel()
		if err != nil {
			t.Fatalf("job %s: %v", id, err)
		}
		if want := map[string]sundial.State{ids.OK: sundial.Succeeded, ids.Fail: sundial.Dead, ids.Echo: sundial.Succeeded}[id]; j.State != want {
			t.Fatalf("job %s %s (%s), want %s", id, j.State, j.LastError, want)
		}
	}

	// TypeScript: read through the API and decrypt.
	run(t, ctx, tsDir, nil, npm, "run", "--silent", "build")
	read := output(t, ctx, ".", append(sdkEnv, "SUNDIAL_KEYRING="+rotated), node, "testdata/xlang_read.mjs",
		filepath.Join(tsDir, "dist", "index.js"), ids.OK, ids.Fail, ids.Echo)
	type tsJob struct {
		State     string          `json:"state"`
		Attempt   int             `json:"attempt"`
		Payload   json.RawMessage `json:"payload"`
		Result    json.RawMessage `json:"result"`
		LastError string          `json:"last_error"`
	}
	var got map[string]struct{ Raw, Plain tsJob }
	if err := json.Unmarshal(read, &got); err != nil {
		t.Fatalf("the TypeScript reader printed %s: %v", read, err)
	}
	ok, fail, echo := got[ids.OK], got[ids.Fail], got[ids.Echo]
	if kid, _ := envelope.KeyID(ok.Raw.Result); kid != "k2" {
		t.Errorf("the Go Runner's result is sealed under %q, want k2 (the primary): %s", kid, ok.Raw.Result)
	}
	if kid, _ := envelope.TextKeyID(fail.Raw.LastError); kid != "k2" || fail.Raw.Attempt != 2 {
		t.Errorf("the failed job's last error %q after %d attempts", fail.Raw.LastError, fail.Raw.Attempt)
	}
	for name, v := range map[string][2]string{
		"payload":           {string(ok.Plain.Payload), `{"ssn":"` + marker + `","lang":"python"}`},
		"Runner result":     {string(ok.Plain.Result), `{"by":"go","from":"python","upper":"` + strings.ToUpper(marker) + `"}`},
		"Runner error text": {fail.Plain.LastError, "declined " + marker},
		"echo result":       {string(echo.Plain.Result), `{"ssn":"` + marker + `"}`},
	} {
		if v[0] != v[1] {
			t.Errorf("%s decrypted in TypeScript: %s, want %s", name, v[0], v[1])
		}
	}
	if bytes.Contains([]byte(fmt.Sprint(ok.Raw, fail.Raw, echo.Raw)), []byte(marker)) {
		t.Error("a raw job as the API answered it holds the marker")
	}

	// A control: a job submitted in the clear, whose error text (its
	// marker) the checks below must find.
	control := "CONTROL-" + queuetest.Name("x")
	sub, err := c.Submit(ctx, sundial.Job{Type: "xlang.check", Queue: checkQ, MaxAttempts: 1,
		Payload: map[string]any{"ssn": control, "fail": true}})
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if j, err := c.Wait(wctx, sub.Job.ID); err != nil || j.LastError != "declined "+control {
		t.Fatalf("the control job: %v, %v", j, err)
	}
	if keys := keysHolding(t, rdb, control); len(keys) == 0 {
		t.Error("the Redis check did not find the control's marker")
	}
	if body := apiGet(t, base, "/v1/jobs/"+sub.Job.ID); !strings.Contains(body, control) {
		t.Errorf("the API check did not find the control's marker: %s", body)
	}
	if msgs := stream.until(t, sub.Job.ID, "dead"); !strings.Contains(msgs, control) {
		t.Error("the stream check did not find the control's marker")
	}

	// Nowhere in the clear: the API's answers, Redis, the stream, the logs.
	for _, path := range []string{
		"/v1/jobs/" + ids.OK, "/v1/jobs/" + ids.Fail, "/v1/jobs/" + ids.Echo,
		"/v1/queues/" + checkQ + "/jobs?state=dead", "/v1/queues/" + checkQ + "/dead", "/v1/queues/" + checkQ,
	} {
		body := apiGet(t, base, path)
		if strings.Contains(body, marker) || strings.Contains(strings.ToLower(body), strings.ToLower(marker)) {
			t.Errorf("GET %s answers the marker: %s", path, body)
		}
	}
	if keys := keysHolding(t, rdb, marker); len(keys) > 0 {
		t.Errorf("Redis keys hold the marker: %v", keys)
	}
	if keys := keysHolding(t, rdb, strings.ToUpper(marker)); len(keys) > 0 {
		t.Errorf("Redis keys hold the upper-cased marker (the result): %v", keys)
	}
	msgs := stream.until(t, ids.Fail, "dead") // the encrypted jobs' events reached the stream
	stream.until(t, ids.OK, "succeeded")
	if strings.Contains(strings.ToLower(msgs), strings.ToLower(marker)) {
		t.Error("the websocket stream carried the marker")
	}
	for name, p := range map[string]*proctest.Proc{"api": api, "poller": poller, "worker": worker} {
		if out := p.Output(); strings.Contains(strings.ToLower(out), strings.ToLower(marker)) || strings.Contains(out, k1) || strings.Contains(out, k2) {
			t.Errorf("the %s's log holds the marker or a key", name)
		}
	}

	// Each SDK's own encryption tests, against this stack.
	t.Run("PythonSuite", func(t *testing.T) {
		tests := filepath.Join(pySrc, "tests")
		run(t, ctx, dir, sdkEnv, vpy, "-m", "unittest", "discover", "-v", "-k", "test_encryption", "-s", tests, "-t", tests)
	})
	t.Run("TypeScriptSuite", func(t *testing.T) {
		run(t, ctx, tsDir, nil, npm, "run", "--silent", "pretest")
		run(t, ctx, tsDir, sdkEnv, node, "--test", filepath.Join("build", "test", "encryption.test.js"))
	})
}

// output runs a command and returns its standard output; its standard
// error goes to the test's log, and a non-zero exit fails the test.
func output(t *testing.T, ctx context.Context, dir string, env []string, argv ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v\n%s", argv, err, stderr.String())
	}
	return out
}

func apiGet(t *testing.T, base, path string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, b)
	}
	return string(b)
}

// streamRecord is what a websocket client of the stream received.
type streamRecord struct {
	mu   sync.Mutex
	msgs bytes.Buffer
	news chan struct{}
}

// recordStream connects to the API's websocket stream and records every
// message until the test ends.
func recordStream(t *testing.T, ctx context.Context, base string) *streamRecord {
	t.Helper()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/v1/stream",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + adminKey}}})
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadLimit(1 << 20)
	t.Cleanup(func() { conn.CloseNow() })
	s := &streamRecord{news: make(chan struct{}, 1)}
	go func() {
		for {
			_, b, err := conn.Read(ctx)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.msgs.Write(b)
			s.msgs.WriteByte('\n')
			s.mu.Unlock()
			select {
			case s.news <- struct{}{}:
			default:
			}
		}
	}()
	return s
}

// until waits until a message of job id in state was received and returns
// every message so far.
func (s *streamRecord) until(t *testing.T, id, state string) string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		s.mu.Lock()
		all := s.msgs.String()
		s.mu.Unlock()
		for _, line := range strings.Split(all, "\n") {
			if strings.Contains(line, `"job_id":"`+id+`"`) && strings.Contains(line, `"state":"`+state+`"`) {
				return all
			}
		}
		select {
		case <-s.news:
		case <-deadline:
			t.Fatalf("no %s event of job %s on the stream; got:\n%s", state, id, all)
		}
	}
}

// keysHolding returns the keys of the Redis whose name, DUMP or content
// (read by type: DUMP may compress) holds marker.
func keysHolding(t *testing.T, rdb *redis.Client, marker string) []string {
	t.Helper()
	ctx := context.Background()
	var found []string
	n := 0
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		n++
		k := iter.Val()
		dump, err := rdb.Dump(ctx, k).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		var content any
		switch typ, _ := rdb.Type(ctx, k).Result(); typ {
		case "string":
			content, _ = rdb.Get(ctx, k).Result()
		case "hash":
			content, _ = rdb.HGetAll(ctx, k).Result()
		case "list":
			content, _ = rdb.LRange(ctx, k, 0, -1).Result()
		case "set":
			content, _ = rdb.SMembers(ctx, k).Result()
		case "zset":
			content, _ = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "stream":
			content, _ = rdb.XRange(ctx, k, "-", "+").Result()
		}
		if strings.Contains(k+dump+fmt.Sprint(content), marker) {
			found = append(found, k)
		}
	}
	if err := iter.Err(); err != nil || n < 10 {
		t.Fatalf("scan: %d keys, %v", n, err)
	}
	return found
}
