package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// Scopes an API key may be limited to (SUNDIAL_API_KEYS entries
// "<key>:<scope>+<scope>"; a key without scopes has them all). Every key
// may read (GET routes, the stream, schedule previews).
const (
	scopeRead   = "read"   // any valid key
	scopeSubmit = "submit" // POST /v1/jobs, /v1/jobs/batch
	scopeWork   = "work"   // the HTTP worker protocol: claim, heartbeat, complete, fail
	scopeAdmin  = "admin"  // everything else that changes state; implies submit and work
)

// authenticator checks bearer API keys. It keeps only digests of the keys.
type authenticator struct {
	digests [][sha256.Size]byte
	// ids are the rate-limit identities of the keys: derived digests, so
	// that no key appears in a Redis key name.
	ids []string
	// scopes of each key; nil means every scope.
	scopes []map[string]bool
}

func newAuthenticator(keys []string) *authenticator {
	a := &authenticator{}
	for _, entry := range keys {
		k, scopes := parseKey(entry)
		a.digests = append(a.digests, sha256.Sum256([]byte(k)))
		id := sha256.Sum256([]byte("sundial rate limit\x00" + k))
		a.ids = append(a.ids, "key:"+hex.EncodeToString(id[:16]))
		a.scopes = append(a.scopes, scopes)
	}
	return a
}

// parseKey splits a SUNDIAL_API_KEYS entry into the key and its scopes:
// "s3cret:submit+work" → "s3cret", {submit, work}. An entry whose part
// after the last ':' is not a list of scope names is a key with every
// scope (so keys may contain ':').
func parseKey(entry string) (string, map[string]bool) {
	i := strings.LastIndexByte(entry, ':')
	if i <= 0 {
		return entry, nil
	}
	scopes := map[string]bool{}
	for _, s := range strings.Split(entry[i+1:], "+") {
		switch s {
		case scopeSubmit, scopeWork, scopeAdmin:
			scopes[s] = true
		default:
			return entry, nil
		}
	}
	return entry[:i], scopes
}

// allows reports whether key i may use a route of scope.
func (a *authenticator) allows(i int, scope string) bool {
	s := a.scopes[i]
	return scope == scopeRead || s == nil || s[scopeAdmin] || s[scope]
}

// keyIndex is the gin context key of the matched API key's index.
const keyIndex = "sundial.key"

// requireScope refuses a request whose key lacks scope with 403.
func (s *Server) requireScope(scope string) gin.HandlerFunc {
	return func(c *gin.Context) {
		if s.auth.open() {
			return
		}
		if i, ok := c.Get(keyIndex); ok && s.auth.allows(i.(int), scope) {
			return
		}
		fail(c, &apiError{Status: http.StatusForbidden, Code: codePermissionDenied,
			Message: "this API key lacks the " + scope + " scope"})
	}
}

// open reports whether no key is configured.
func (a *authenticator) open() bool { return len(a.digests) == 0 }

// match returns the index of the presented key, or -1. It compares the
// presented key's digest with every key's digest in constant time and does
// not stop at a match, so the time taken reveals neither which key matched
// nor how much of one.
func (a *authenticator) match(presented string) int {
	if presented == "" {
		return -1
	}
	d := sha256.Sum256([]byte(presented))
	found := -1
	for i := range a.digests {
		eq := subtle.ConstantTimeCompare(d[:], a.digests[i][:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	return found
}

// presentedKey returns the bearer token of r; for the websocket, whose
// browser clients cannot set headers, also the access_token parameter.
func presentedKey(r *http.Request, allowQuery bool) string {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(token)
		}
		return ""
	}
	if allowQuery {
		return r.URL.Query().Get("access_token")
	}
	return ""
}

var (
	errNoKey  = &apiError{Status: http.StatusUnauthorized, Code: codeUnauthenticated, Message: "missing API key: send Authorization: Bearer <key>"}
	errBadKey = &apiError{Status: http.StatusUnauthorized, Code: codeUnauthenticated, Message: "invalid API key"}
)

// guard authenticates and rate-limits every /v1 request. The caller's
// identity for the rate limit is its API key's id, its IP when the API is
// open, and a separate per-IP bucket for requests without a valid key, so
// that guessing keys is throttled without spending a real key's budget.
// A rejected key is therefore answered 401 after the rate limit, with the
// rate-limit headers like every /v1 answer.
func (s *Server) guard(c *gin.Context) {
	if !strings.HasPrefix(c.Request.URL.Path, "/v1/") {
		c.Next()
		return
	}
	var identity string
	var authErr error
	if s.auth.open() {
		if s.limit != nil { // the identity is only for the rate limit: no client IP to parse without one
			identity = "ip:" + c.ClientIP()
		}
	} else {
		presented := presentedKey(c.Request, c.FullPath() == streamPath)
		if i := s.auth.match(presented); i >= 0 {
			identity = s.auth.ids[i]
			c.Set(keyIndex, i)
		} else {
			identity = "anon:" + c.ClientIP()
			authErr = errBadKey
			if presented == "" {
				authErr = errNoKey
			}
		}
	}
	if s.limit != nil && !s.rateLimit(c, identity) {
		return
	}
	if authErr != nil {
		fail(c, authErr)
		return
	}
	c.Next()
}
