package httpapi

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// CORS headers: what a browser on an allowed origin may send and read.
const (
	corsAllowMethods  = "GET, POST, PUT, PATCH, DELETE"
	corsAllowHeaders  = "Authorization, Content-Type, X-Request-Id"
	corsExposeHeaders = "Location, Retry-After, X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset"
	corsMaxAge        = "600"
)

// cors lets the browser origins of SUNDIAL_ALLOWED_ORIGINS (a dashboard
// served from elsewhere, e.g. a dev server) call the REST API. It answers
// preflight requests itself, before authentication, since browsers send
// them without credentials. Other origins get no CORS headers, so browsers
// keep them out; same-origin requests need none.
func (s *Server) cors(c *gin.Context) {
	origin := c.GetHeader("Origin")
	if origin == "" || len(s.cfg.AllowedOrigins) == 0 || !strings.HasPrefix(c.Request.URL.Path, "/v1/") {
		c.Next()
		return
	}
	h := c.Writer.Header()
	h.Add("Vary", "Origin")
	if !originAllowed(c.Request, s.cfg.AllowedOrigins) {
		c.Next()
		return
	}
	h.Set("Access-Control-Allow-Origin", origin)
	if c.Request.Method == http.MethodOptions && c.GetHeader("Access-Control-Request-Method") != "" {
		h.Set("Access-Control-Allow-Methods", corsAllowMethods)
		h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
		h.Set("Access-Control-Max-Age", corsMaxAge)
		c.AbortWithStatus(http.StatusNoContent)
		return
	}
	h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
	c.Next()
}
