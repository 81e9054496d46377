package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/pkg/access"
	"github.com/sundialhq/sundial/pkg/audit"
)

// Scopes an API key may be limited to (SUNDIAL_API_KEYS entries
// "<key>:<scope>+<scope>"; a key without scopes has them all). Every key
// may read (GET routes, the stream, schedule previews).
const (
	scopeRead   = "read"   // any valid key
	scopeSubmit = "submit" // POST /v1/jobs, /v1/jobs/batch
	scopeWork   = "work"   // the HTTP worker protocol: claim, heartbeat, complete, fail
	scopeAdmin  = "admin"  // everything else that changes state; implies submit, work and operate
	// scopeOperate is an operator's: act on jobs, queues, schedules and
	// batches (cancel, retry, bulk actions, dead letters, pause, resume,
	// forget, schedules), not on limits, uniqueness or the audit log.
	scopeOperate = "operate"
)

// authenticator checks bearer API keys. It keeps only digests of the keys.
type authenticator struct {
	digests [][sha256.Size]byte
	// ids are the rate-limit identities of the keys: derived digests, so
	// that no key appears in a Redis key name.
	ids []string
	// keyIDs name the keys in the audit log (audit.KeyID).
	keyIDs []string
	// scopes of each key; nil means every scope.
	scopes []map[string]bool
	// queues each key is limited to (the zero Patterns: every queue).
	queues []access.Patterns
}

func newAuthenticator(keys []string) *authenticator {
	a := &authenticator{}
	for _, entry := range keys {
		k, scopes, queues := parseKey(entry)
		a.digests = append(a.digests, sha256.Sum256([]byte(k)))
		id := sha256.Sum256([]byte("sundial rate limit\x00" + k))
		a.ids = append(a.ids, "key:"+hex.EncodeToString(id[:16]))
		a.keyIDs = append(a.keyIDs, audit.KeyID(k))
		a.scopes = append(a.scopes, scopes)
		a.queues = append(a.queues, queues)
	}
	return a
}

// parseKey splits a SUNDIAL_API_KEYS entry into the key, its scopes and
// its queue patterns: "s3cret:submit+work@billing-*|ops-*" → "s3cret",
// {submit, work}, billing-*|ops-*. An entry whose part after the last '@'
// is not a list of queue patterns has no queue limit, and one whose part
// after the last ':' is not a list of scope names is a key with every
// scope (so keys may contain ':').
func parseKey(entry string) (string, map[string]bool, access.Patterns) {
	var queues access.Patterns
	if i := strings.LastIndexByte(entry, '@'); i > 0 {
		if p, err := access.Parse(entry[i+1:]); err == nil {
			entry, queues = entry[:i], p
		}
	}
	i := strings.LastIndexByte(entry, ':')
	if i <= 0 {
		return entry, nil, queues
	}
	scopes := map[string]bool{}
	for _, s := range strings.Split(entry[i+1:], "+") {
		switch s {
		case scopeSubmit, scopeWork, scopeOperate, scopeAdmin:
			scopes[s] = true
		default:
			return entry, nil, queues
		}
	}
	return entry[:i], scopes, queues
}

// principal is who a request acts as: its actor for the audit log, the
// scopes it may use and the queues it may see.
type principal struct {
	actor  audit.Actor
	scopes map[string]bool // nil: every scope
	queues access.Patterns // the zero value: every queue
	// cookie: authenticated by the dashboard's session cookie, so that
	// state-changing requests need the CSRF header; csrfErr is set when
	// this one lacks it.
	cookie  bool
	csrfErr error
}

// allows reports whether p may use a route of scope.
func (p *principal) allows(scope string) bool {
	return scope == scopeRead || p.scopes == nil || p.scopes[scopeAdmin] || p.scopes[scope]
}

// ctxPrincipal is the gin context key of the request's *principal.
const ctxPrincipal = "sundial.principal"

// principalOf returns the request's principal; an anonymous one with every
// scope when the API is open.
func principalOf(c *gin.Context) *principal {
	if v, ok := c.Get(ctxPrincipal); ok {
		return v.(*principal)
	}
	return &principal{actor: audit.Actor{Kind: audit.ActorAnonymous, IP: c.ClientIP()}}
}

// actorOf returns the request's actor for the audit log.
func actorOf(c *gin.Context) audit.Actor { return principalOf(c).actor }

// requireScope refuses a request whose key lacks scope with 403.
func (s *Server) requireScope(scope string) gin.HandlerFunc {
	return func(c *gin.Context) {
		if s.open() {
			return
		}
		v, ok := c.Get(ctxPrincipal)
		if ok && v.(*principal).csrfErr != nil {
			c.Set(ctxAuditDetail, "missing or wrong CSRF token")
			fail(c, v.(*principal).csrfErr)
			return
		}
		if ok && v.(*principal).allows(scope) {
			return
		}
		c.Set(ctxAuditDetail, "lacks the "+scope+" scope")
		fail(c, &apiError{Status: http.StatusForbidden, Code: codePermissionDenied,
			Message: "this API key lacks the " + scope + " scope"})
	}
}

// open reports whether no key is configured.
func (a *authenticator) open() bool { return len(a.digests) == 0 }

// open reports whether the API serves /v1 without credentials: no key and
// no sign-in configured.
func (s *Server) open() bool { return s.auth.open() && s.oidc == nil }

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
	if s.open() {
		if s.limit != nil { // the identity is only for the rate limit: no client IP to parse without one
			identity = "ip:" + c.ClientIP()
		}
	} else {
		presented := presentedKey(c.Request, c.FullPath() == streamPath)
		if presented == "" && s.oidc != nil {
			identity, authErr = s.guardSession(c)
		} else if i := s.auth.match(presented); i >= 0 {
			identity = s.auth.ids[i]
			c.Set(ctxPrincipal, &principal{
				actor:  audit.Actor{Kind: audit.ActorKey, ID: s.auth.keyIDs[i], IP: c.ClientIP()},
				scopes: s.auth.scopes[i], queues: s.auth.queues[i],
			})
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
		if s.oidc != nil {
			c.Header(signInHeader, "/auth/login")
		}
		status := toAPIError(authErr).Status
		fail(c, authErr)
		c.Set(ctxAuditDetail, authErr.Error())
		s.record(c, "auth.refused", auditTarget(c), status)
		return
	}
	c.Next()
}

// signInHeader tells the dashboard, on a 401, where to sign in.
const signInHeader = "X-Sundial-Sign-In"

// guardSession authenticates a request without a key by the dashboard's
// session cookie; a state-changing request also needs the CSRF header.
func (s *Server) guardSession(c *gin.Context) (identity string, err error) {
	p, sess, err := s.oidc.sessionPrincipal(c)
	switch {
	case err != nil:
		return "anon:" + c.ClientIP(), err
	case p == nil:
		return "anon:" + c.ClientIP(), errNoSession
	}
	c.Set(ctxPrincipal, p)
	id := sha256.Sum256([]byte("sundial rate limit user\x00" + p.actor.ID))
	identity = "user:" + hex.EncodeToString(id[:16])
	// Refused by requireScope, inside the route's audit record.
	p.csrfErr = checkCSRF(c, sess)
	return identity, nil
}
