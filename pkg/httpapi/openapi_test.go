package httpapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sundialhq/sundial/pkg/queue"
)

var update = flag.Bool("update", false, "rewrite openapi.json from the route table")

// newOffline builds a Server that is never run, for tests of its surface.
func newOffline(t *testing.T) *Server {
	t.Helper()
	s, err := New(Config{Queue: queue.New(nil, queue.Options{}), Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestOpenAPIGolden keeps openapi.json (embedded and served) equal to the
// document generated from the route table and the Go types. After a
// deliberate change: go test ./pkg/httpapi -run TestOpenAPIGolden -update
func TestOpenAPIGolden(t *testing.T) {
	t.Parallel()
	got, err := buildOpenAPI(newOffline(t).routes())
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("openapi.json", got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("openapi.json is out of date with the route table: run go test ./pkg/httpapi -run TestOpenAPIGolden -update and review the diff")
	}
	if !bytes.Equal(openAPIDoc, want) {
		t.Fatal("the embedded document differs from openapi.json: rebuild")
	}
}

// TestEveryRouteDocumented checks that every route Gin serves is in the
// document, and every documented operation is served.
func TestEveryRouteDocumented(t *testing.T) {
	t.Parallel()
	s := newOffline(t)
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	served := map[string]bool{}
	for _, r := range s.engine.Routes() {
		key := strings.ToLower(r.Method) + " " + openAPIPath(r.Path)
		served[key] = true
		if _, ok := doc.Paths[openAPIPath(r.Path)][strings.ToLower(r.Method)]; !ok {
			t.Errorf("%s %s is served but not documented", r.Method, r.Path)
		}
	}
	for p, ops := range doc.Paths {
		for m := range ops {
			if !served[m+" "+p] {
				t.Errorf("%s %s is documented but not served", m, p)
			}
		}
	}
}

// TestOpenAPIServed checks GET /v1/openapi.json and that the schemas
// describe what the API really answers.
func TestOpenAPIServed(t *testing.T) {
	a := start(t)
	res := a.do("GET", "/v1/openapi.json", nil)
	if res.status != http.StatusOK || !bytes.Equal(res.body, openAPIDoc) || res.header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s", res.status, res.header.Get("Content-Type"))
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
				Required   []string                   `json:"required"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(res.body, &doc); err != nil {
		t.Fatal(err)
	}
	j := a.submit(t, map[string]any{"type": "a", "payload": 1, "depends_on": []string{}, "idempotency_key": "k"})
	var fields map[string]json.RawMessage
	data, _ := json.Marshal(j)
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	for f := range fields {
		if _, ok := doc.Components.Schemas["Job"].Properties[f]; !ok {
			t.Errorf("Job field %q is not documented", f)
		}
	}
	if req := doc.Components.Schemas["JobSpec"].Required; len(req) != 1 || req[0] != "type" {
		t.Errorf("JobSpec required %v", req)
	}
}

// OpenAPI requires a schema for every parameter: a path parameter that
// pathParams does not describe stops the document's generation instead of
// leaving it invalid (as the limits' {name} once did).
func TestPathParametersNeedSchemas(t *testing.T) {
	t.Parallel()
	routes := []route{{Method: http.MethodGet, Path: "/v1/things/:thing", Doc: operation{ID: "getThing", Tag: "things", Status: http.StatusOK}}}
	if _, err := buildOpenAPI(routes); err == nil || !strings.Contains(err.Error(), `"thing"`) {
		t.Fatalf("buildOpenAPI with an undescribed path parameter: %v, want an error naming it", err)
	}
}

// A struct embedded without a JSON name is written by encoding/json as its
// fields, and the document says so: a limit's fields are the object's own,
// not a "Limit" member.
func TestEmbeddedFieldsAreInlined(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
				Required   []string                   `json:"required"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Limit", "LimitSpec"} {
		s := doc.Components.Schemas[name]
		for _, p := range []string{"name", "types", "key", "concurrency", "rate", "active", "throttled"} {
			if _, ok := s.Properties[p]; !ok {
				t.Errorf("schema %s has no property %s", name, p)
			}
		}
		if _, ok := s.Properties["Limit"]; ok {
			t.Errorf("schema %s wraps its fields in a Limit property", name)
		}
	}
	if got := doc.Components.Schemas["Limit"].Required; !slices.Equal(got, []string{"active", "throttled", "name"}) {
		t.Errorf("Limit requires %v", got)
	}
}
