package httpapi

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// slowRoute adds a route that signals entered, then answers 200 when
// release closes or gives up when the request's context ends.
func slowRoute(a *testAPI) (entered chan struct{}, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	a.s.engine.GET("/v1/test-slow", func(c *gin.Context) {
		close(entered)
		select {
		case <-release:
			c.JSON(http.StatusOK, healthBody{Status: "done"})
		case <-c.Request.Context().Done():
		}
	})
	return entered, release
}

// TestShutdownDrainsInFlight begins the shutdown while a request is being
// handled and checks that it is answered in full.
func TestShutdownDrainsInFlight(t *testing.T) {
	a := start(t)
	entered, release := slowRoute(a)
	answered := make(chan response, 1)
	go func() { answered <- a.do("GET", "/v1/test-slow", nil) }()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- a.stop() }()
	addr := strings.TrimPrefix(a.base, "http://")
	queuetest.Eventually(t, 10*time.Second, "the listener closes", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	select {
	case err := <-stopped:
		t.Fatalf("Run returned before the in-flight request finished: %v", err)
	default:
	}
	close(release)
	res := <-answered
	if res.status != http.StatusOK || !strings.Contains(string(res.body), "done") {
		t.Fatalf("the in-flight request was cut: %d %s", res.status, res.body)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}

// TestShutdownTimeout checks that a request that does not finish holds the
// shutdown no longer than ShutdownTimeout.
func TestShutdownTimeout(t *testing.T) {
	a := start(t, func(c *Config) { c.ShutdownTimeout = 200 * time.Millisecond })
	entered, _ := slowRoute(a)
	failed := make(chan error, 1)
	go func() {
		_, err := a.client.Get(a.base + "/v1/test-slow")
		failed <- err
	}()
	<-entered
	begin := time.Now()
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d > 3*time.Second {
		t.Fatalf("shutdown took %v", d)
	}
	if err := <-failed; err == nil {
		t.Fatal("the stuck request was answered")
	}
}
