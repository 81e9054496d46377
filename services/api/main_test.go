package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/freeport"
)

// TestPlainBuildServesTheDashboard: the api binary of a plain go build, as
// go install …/services/api@latest makes it (no npm, no make web before it),
// serves the dashboard at / — the built app, not the "not built" page. The
// API answers / with Redis down, so none is started here.
func TestPlainBuildServesTheDashboard(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the api binary")
	}
	bin := filepath.Join(t.TempDir(), "api")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	httpPort, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	redisPort, err := freeport.Port() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	var log strings.Builder
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		fmt.Sprintf("SUNDIAL_HTTP_ADDR=127.0.0.1:%d", httpPort),
		fmt.Sprintf("SUNDIAL_REDIS_URL=redis://127.0.0.1:%d/0", redisPort),
		"SUNDIAL_HISTORY=off", "SUNDIAL_METRICS_ADDR=off", "SUNDIAL_PPROF_ADDR=off", "SUNDIAL_LOG_LEVEL=warn", "SUNDIAL_SHUTDOWN_TIMEOUT=1s")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})

	get := func(path string) (int, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, string(b), err
	}
	var index string
	for deadline := time.Now().Add(30 * time.Second); ; {
		status, body, err := get("/")
		if err == nil && status == http.StatusOK {
			index = body
			break
		}
		select {
		case <-done:
			t.Fatalf("the api exited: %s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /: %d %v; log:\n%s", status, err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if strings.Contains(index, "not built") || !strings.Contains(index, `<div id="root"></div>`) {
		t.Fatalf("GET / is not the dashboard:\n%s", index)
	}
	script := regexp.MustCompile(`src="(/assets/index-[\w-]+\.js)"`).FindStringSubmatch(index)
	if script == nil {
		t.Fatalf("index.html loads no script:\n%s", index)
	}
	status, js, err := get(script[1])
	if err != nil || status != http.StatusOK || len(js) < 10_000 {
		t.Fatalf("GET %s: %d, %d bytes, %v", script[1], status, len(js), err)
	}
	// A client route answers the app too.
	if status, body, err := get("/jobs"); err != nil || status != http.StatusOK || body != index {
		t.Fatalf("GET /jobs: %d %v", status, err)
	}
}
