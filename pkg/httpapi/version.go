package httpapi

import (
	"net/http"
	"runtime"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/internal/buildinfo"
)

// versionInfo is the answer of GET /v1/version.
type versionInfo struct {
	// Version is the Sundial release (semantic versioning).
	Version string `json:"version"`
	// Go is the Go version the binary was built with.
	Go string `json:"go"`
}

// version handles GET /v1/version.
func (s *Server) version(c *gin.Context) {
	if err := checkQuery(c); err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, versionInfo{Version: buildinfo.Version, Go: runtime.Version()})
}
