package httpapi

import (
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// openAPIDoc is the OpenAPI 3.1 document of the API; TestOpenAPIGolden
// keeps it equal to what the route table generates.
//
//go:embed openapi.json
var openAPIDoc []byte

// openAPI handles GET /v1/openapi.json.
func (s *Server) openAPI(c *gin.Context) {
	c.Data(http.StatusOK, "application/json", openAPIDoc)
}

// metricsHandler handles GET /metrics in the Prometheus text format.
func (s *Server) metricsHandler() gin.HandlerFunc {
	return gin.WrapH(promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
}
