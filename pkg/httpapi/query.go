package httpapi

import (
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/pkg/job"
)

// Paging bounds of the list routes.
const (
	defaultPageSize = 50
	maxPageSize     = 500
)

// checkQuery rejects query parameters other than allowed, so that a typo
// such as ?stat=dead is an error rather than a silently ignored filter.
func checkQuery(c *gin.Context, allowed ...string) error {
	for name := range c.Request.URL.Query() {
		ok := false
		for _, a := range allowed {
			// "x.*" allows every parameter x.<name> (payload.<field>).
			if name == a || (strings.HasSuffix(a, ".*") && strings.HasPrefix(name, a[:len(a)-1]) && len(name) > len(a)-1) {
				ok = true
				break
			}
		}
		if !ok {
			return invalid(name, "unknown query parameter %q", name)
		}
	}
	return nil
}

// queryLimit parses ?limit=, 1..maxPageSize, defaultPageSize when absent.
func queryLimit(c *gin.Context) (int, error) { return queryLimitUpTo(c, maxPageSize) }

// queryLimitUpTo parses ?limit=, 1..most, defaultPageSize when absent.
func queryLimitUpTo(c *gin.Context, most int) (int, error) {
	v, ok := c.GetQuery("limit")
	if !ok {
		return defaultPageSize, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, invalid("limit", "limit must be a whole number between 1 and %d", most)
	}
	return n, nil
}

// queryTime parses an optional RFC 3339 time parameter.
func queryTime(c *gin.Context, name string) (time.Time, error) {
	v, ok := c.GetQuery(name)
	if !ok || v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, invalid(name, "%s must be an RFC 3339 time such as 2026-11-22T10:00:00Z", name)
	}
	return t, nil
}

// queueParam returns the {q} path parameter after checking its form.
func queueParam(c *gin.Context) (string, error) {
	q := c.Param("q")
	if !job.ValidQueue(q) {
		return "", invalid("queue", "queue must match [a-z0-9_-]{1,64}")
	}
	return q, nil
}
