package httpapi

import (
	"strings"
	"testing"
)

func TestRequestID(t *testing.T) {
	a := start(t)
	if got := a.do("GET", "/healthz", nil, "X-Request-Id", "trace-42.a:b/c+d=").header.Get("X-Request-Id"); got != "trace-42.a:b/c+d=" {
		t.Errorf("a sane id was not kept: %q", got)
	}
	for _, bad := range []string{"has space", "quote\"", strings.Repeat("x", 129), "semi;colon"} {
		got := a.do("GET", "/healthz", nil, "X-Request-Id", bad).header.Get("X-Request-Id")
		if got == bad || !saneRequestID(got) {
			t.Errorf("id %q answered as %q", bad, got)
		}
	}
	one := a.do("GET", "/healthz", nil).header.Get("X-Request-Id")
	two := a.do("GET", "/healthz", nil).header.Get("X-Request-Id")
	if one == "" || one == two {
		t.Errorf("generated ids %q %q", one, two)
	}
}

func TestAccessLog(t *testing.T) {
	a := start(t, func(c *Config) { c.APIKeys = []string{"very-secret-key"} })
	j := a.do("POST", "/v1/jobs", `{"type":"a"}`, "Authorization", "Bearer very-secret-key", "X-Request-Id", "req-1")
	j.decode(t, 201, nil)
	a.do("GET", "/v1/jobs/nope", nil, "Authorization", "Bearer very-secret-key", "X-Request-Id", "req-2").wantError(t, 404, codeNotFound, "")
	c := a.mustDial(t, "access_token=very-secret-key")
	a.waitClients(t, 1)
	c.CloseNow()
	a.waitClients(t, 0)
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	logs := a.logs.String()
	for _, want := range []string{
		`msg="http request" request_id=req-1 method=POST route=/v1/jobs status=201 duration_ms=`,
		`request_id=req-2 method=GET route=/v1/jobs/:id status=404`,
		`route=/v1/stream status=101`,
		`remote_ip=127.0.0.1`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	for _, secret := range []string{"very-secret-key", "Bearer", "access_token"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log contains %q:\n%s", secret, logs)
		}
	}
}
