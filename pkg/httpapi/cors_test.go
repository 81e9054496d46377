package httpapi

import (
	"net/http"
	"testing"
)

func TestCORS(t *testing.T) {
	a := start(t, func(c *Config) {
		c.AllowedOrigins = []string{"http://localhost:5173"}
		c.APIKeys = []string{"k"}
	})
	// A preflight needs no key and answers what may be sent.
	res := a.do("OPTIONS", "/v1/jobs", nil, "Origin", "http://localhost:5173", "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "authorization,content-type")
	if res.status != http.StatusNoContent || res.header.Get("Access-Control-Allow-Origin") != "http://localhost:5173" ||
		res.header.Get("Access-Control-Allow-Headers") == "" {
		t.Fatalf("preflight: %d %v", res.status, res.header)
	}
	// The request itself exposes the API's headers to the page.
	res = a.do("GET", "/v1/queues", nil, "Origin", "http://localhost:5173", "Authorization", "Bearer k")
	if res.status != http.StatusOK || res.header.Get("Access-Control-Allow-Origin") != "http://localhost:5173" ||
		res.header.Get("Access-Control-Expose-Headers") == "" {
		t.Fatalf("request: %d %v", res.status, res.header)
	}
	// Another origin gets no CORS headers (the browser then hides the answer).
	res = a.do("OPTIONS", "/v1/jobs", nil, "Origin", "http://evil.example", "Access-Control-Request-Method", "POST")
	if res.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("foreign origin allowed: %v", res.header)
	}
	res.wantError(t, http.StatusUnauthorized, codeUnauthenticated, "")
}
