package httpapi

import (
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// indexHTML is a placeholder live view (plain JS over /v1/stream) served at
// GET / until the dashboard of web/ is built into the binary.
//
//go:embed static/index.html
var indexHTML []byte

// openAPIDoc is the OpenAPI 3.1 document of the API; TestOpenAPIGolden
// keeps it equal to what the route table generates.
//
//go:embed openapi.json
var openAPIDoc []byte

// index handles GET /.
func (s *Server) index(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self' ws: wss:; frame-ancestors 'none'")
	c.Data(http.StatusOK, "text/html; charset=utf-8", indexHTML)
}

// openAPI handles GET /v1/openapi.json.
func (s *Server) openAPI(c *gin.Context) {
	c.Data(http.StatusOK, "application/json", openAPIDoc)
}

// metricsHandler handles GET /metrics in the Prometheus text format.
func (s *Server) metricsHandler() gin.HandlerFunc {
	return gin.WrapH(promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
}
