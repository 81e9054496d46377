package httpapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/pkg/access"
	"github.com/sundialhq/sundial/pkg/audit"
	"golang.org/x/oauth2"
)

// Roles a sign-in maps to, from the least to the most allowed.
const (
	RoleViewer   = "viewer"   // read
	RoleOperator = "operator" // read, submit, work, operate (jobs, queues, schedules, batches, signals)
	RoleAdmin    = "admin"    // everything: limits, uniqueness, the audit log too
)

var roleRank = map[string]int{RoleViewer: 1, RoleOperator: 2, RoleAdmin: 3}

// roleScopes are the scopes of each role (nil: every scope).
func roleScopes(role string) map[string]bool {
	switch role {
	case RoleAdmin:
		return nil
	case RoleOperator:
		return map[string]bool{scopeSubmit: true, scopeWork: true, scopeOperate: true}
	}
	return map[string]bool{}
}

// RoleMapping maps a value of the roles claim to a role, optionally
// limited to queue patterns.
type RoleMapping struct {
	Claim  string
	Role   string
	Queues access.Patterns
}

// ParseRoleMappings reads SUNDIAL_OIDC_ROLES: comma-separated
// "<claim value>=<role>[@<pattern>|<pattern>]" entries, e.g.
// "sundial-admins=admin,billing-team=operator@billing-*,staff=viewer".
// Empty: the claim's values viewer, operator and admin are the roles.
func ParseRoleMappings(s string) ([]RoleMapping, error) {
	if strings.TrimSpace(s) == "" {
		return []RoleMapping{{Claim: RoleViewer, Role: RoleViewer}, {Claim: RoleOperator, Role: RoleOperator}, {Claim: RoleAdmin, Role: RoleAdmin}}, nil
	}
	var out []RoleMapping
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		claim, rest, ok := strings.Cut(e, "=")
		if !ok || claim == "" {
			return nil, fmt.Errorf("role mapping %q: want <claim value>=<role>[@<patterns>]", e)
		}
		role, pats, limited := strings.Cut(rest, "@")
		if roleRank[role] == 0 {
			return nil, fmt.Errorf("role mapping %q: role must be viewer, operator or admin", e)
		}
		m := RoleMapping{Claim: claim, Role: role}
		if limited {
			p, err := access.Parse(pats)
			if err != nil {
				return nil, fmt.Errorf("role mapping %q: %w", e, err)
			}
			m.Queues = p
		}
		out = append(out, m)
	}
	return out, nil
}

// OIDCConfig configures sign-in to the dashboard with OpenID Connect (the
// authorization code flow with PKCE). API keys keep working beside it.
type OIDCConfig struct {
	// Issuer is the provider's issuer URL; its discovery document is read
	// at the first sign-in.
	Issuer string
	// ClientID and ClientSecret are this API's client at the provider
	// (the secret may be empty for a public client with PKCE).
	ClientID, ClientSecret string
	// RedirectURL is this API's /auth/callback as the provider knows it:
	// https://sundial.example.com/auth/callback. An https URL makes the
	// cookies Secure.
	RedirectURL string
	// RolesClaim names the ID token's claim that holds the user's roles or
	// groups (a string or a list of strings). Default "groups".
	RolesClaim string
	// Roles map the claim's values to roles (ParseRoleMappings); empty
	// means the values viewer, operator and admin themselves.
	Roles []RoleMapping
	// SessionSecret seals the cookies (at least 16 bytes). Empty: derived
	// from ClientSecret.
	SessionSecret []byte
	// SessionIdle ends a session not used for this long (default 8 h);
	// each use renews it. SessionMax ends it anyway (default 24 h).
	SessionIdle, SessionMax time.Duration
	// HTTPClient reaches the provider. Default http.DefaultClient.
	HTTPClient *http.Client
}

// oidcAuth is the sign-in of a Server.
type oidcAuth struct {
	cfg    OIDCConfig
	seal   *sealer
	secure bool
	oauth  oauth2.Config

	mu       sync.Mutex
	provider *oidc.Provider // discovered at the first sign-in
	verifier *oidc.IDTokenVerifier
}

func newOIDCAuth(cfg OIDCConfig) (*oidcAuth, error) {
	if cfg.Issuer == "" || cfg.ClientID == "" || cfg.RedirectURL == "" {
		return nil, errors.New("OpenID Connect needs an issuer, a client id and a redirect URL")
	}
	u, err := url.Parse(cfg.RedirectURL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("OpenID Connect redirect URL %q is not an http(s) URL", cfg.RedirectURL)
	}
	secret := cfg.SessionSecret
	if len(secret) == 0 {
		secret = []byte(cfg.ClientSecret)
	}
	if len(secret) < 16 {
		return nil, errors.New("OpenID Connect needs a session secret of at least 16 bytes (SUNDIAL_SESSION_SECRET) when the client secret is shorter")
	}
	seal, err := newSealer(secret)
	if err != nil {
		return nil, err
	}
	if cfg.RolesClaim == "" {
		cfg.RolesClaim = "groups"
	}
	if len(cfg.Roles) == 0 {
		cfg.Roles, _ = ParseRoleMappings("")
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = 8 * time.Hour
	}
	if cfg.SessionMax <= 0 {
		cfg.SessionMax = 24 * time.Hour
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	return &oidcAuth{cfg: cfg, seal: seal, secure: u.Scheme == "https"}, nil
}

// discover reads the provider's discovery document once it answers.
func (o *oidcAuth) discover(ctx context.Context) (*oidc.IDTokenVerifier, *oauth2.Config, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.provider == nil {
		p, err := oidc.NewProvider(oidc.ClientContext(ctx, o.cfg.HTTPClient), o.cfg.Issuer)
		if err != nil {
			return nil, nil, err
		}
		o.provider = p
		o.verifier = p.Verifier(&oidc.Config{ClientID: o.cfg.ClientID})
		o.oauth = oauth2.Config{ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret, RedirectURL: o.cfg.RedirectURL,
			Endpoint: p.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "profile", "email"}}
	}
	cfg := o.oauth
	return o.verifier, &cfg, nil
}

// role picks the user's role from the claim's values: the highest mapped
// role, limited to the union of the queue patterns of the mappings that
// grant it (a mapping without patterns: every queue).
func (o *oidcAuth) role(values []string) (role string, queues access.Patterns, matched []string) {
	best := 0
	var pats []access.Patterns
	for _, m := range o.cfg.Roles {
		found := false
		for _, v := range values {
			if v == m.Claim {
				found = true
			}
		}
		if !found {
			continue
		}
		matched = append(matched, m.Claim)
		switch r := roleRank[m.Role]; {
		case r > best:
			best, role, pats = r, m.Role, []access.Patterns{m.Queues}
		case r == best:
			pats = append(pats, m.Queues)
		}
	}
	for i, p := range pats {
		if i == 0 {
			queues = p
		} else {
			queues = queues.Union(p)
		}
	}
	return role, queues, matched
}

// claimValues reads the roles claim: a string or a list of strings.
func claimValues(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, e := range t {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

var (
	errNoSession  = &apiError{Status: http.StatusUnauthorized, Code: codeUnauthenticated, Message: "missing credentials: sign in (/auth/login) or send Authorization: Bearer <key>"}
	errBadSession = &apiError{Status: http.StatusUnauthorized, Code: codeUnauthenticated, Message: "the session has expired or is not valid: sign in again"}
	errCSRF       = &apiError{Status: http.StatusForbidden, Code: codePermissionDenied, Message: "missing or wrong " + csrfHeader + " header: a request made with the session cookie must send the sundial_csrf cookie's value in it"}
	errSignIn     = &apiError{Status: http.StatusUnauthorized, Code: codeUnauthenticated, Message: "sign-in failed: start again at /auth/login"}
	errNoRole     = &apiError{Status: http.StatusForbidden, Code: codePermissionDenied, Message: "signed in, but no role of this dashboard is granted to you: ask an administrator"}
)

// sessionPrincipal reads the request's session cookie: the principal, or
// nil without a cookie; errBadSession for an expired or forged one. A
// session used after half its idle time is renewed (a new cookie).
func (o *oidcAuth) sessionPrincipal(c *gin.Context) (*principal, *session, error) {
	ck, err := c.Request.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return nil, nil, nil
	}
	var s session
	if err := o.seal.open(sessionCookie, ck.Value, &s); err != nil {
		return nil, nil, errBadSession
	}
	now := time.Now().Unix()
	if now >= s.Expires || now >= s.MaxAt {
		return nil, nil, errBadSession
	}
	queues, err := access.Parse(s.Queues)
	if s.Queues == "" || s.Queues == "*" {
		queues, err = access.All, nil
	}
	if err != nil {
		return nil, nil, errBadSession
	}
	if now-s.Issued > int64(o.cfg.SessionIdle/time.Second)/2 {
		s.Issued, s.Expires = now, min(now+int64(o.cfg.SessionIdle/time.Second), s.MaxAt)
		o.setSession(c, &s)
	}
	return &principal{
		actor:  audit.Actor{Kind: audit.ActorUser, ID: s.Subject, Name: s.Name, IP: c.ClientIP()},
		scopes: roleScopes(s.Role), queues: queues, cookie: true,
	}, &s, nil
}

// setSession writes the session and CSRF cookies.
func (o *oidcAuth) setSession(c *gin.Context, s *session) error {
	v, err := o.seal.seal(sessionCookie, s)
	if err != nil {
		return err
	}
	age := int(s.Expires - time.Now().Unix())
	http.SetCookie(c.Writer, o.cookie(sessionCookie, v, "/", age, true))
	http.SetCookie(c.Writer, o.cookie(csrfCookie, s.CSRF, "/", age, false))
	return nil
}

// checkCSRF refuses a state-changing request authenticated by the cookie
// whose X-CSRF-Token is not the session's token.
func checkCSRF(c *gin.Context, s *session) error {
	switch c.Request.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	got := c.GetHeader(csrfHeader)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.CSRF)) != 1 {
		return errCSRF
	}
	return nil
}

// safeNext is where a sign-in returns: a path of this site, "/" otherwise.
func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") || strings.ContainsAny(next, "\r\n") {
		return "/"
	}
	return next
}

// signIn handles GET /auth/login: it sends the browser to the provider.
func (s *Server) signIn(c *gin.Context) {
	o := s.oidc
	if o == nil {
		s.notFound(c)
		return
	}
	_, oc, err := o.discover(c.Request.Context())
	if err != nil {
		s.log.Warn("sign-in: the OpenID provider cannot be reached", "err", err)
		fail(c, &apiError{Status: http.StatusServiceUnavailable, Code: codeUnavailable, Message: "the identity provider cannot be reached; try again later"})
		return
	}
	f := signinFlow{State: randomToken(), Nonce: randomToken(), Verifier: oauth2.GenerateVerifier(),
		Next: safeNext(c.Query("next")), Expires: time.Now().Add(flowTTL).Unix()}
	v, err := o.seal.seal(flowCookie, f)
	if err != nil {
		fail(c, err)
		return
	}
	http.SetCookie(c.Writer, o.cookie(flowCookie, v, "/auth/", int(flowTTL/time.Second), true))
	c.Header("Cache-Control", "no-store")
	c.Redirect(http.StatusFound, oc.AuthCodeURL(f.State, oauth2.S256ChallengeOption(f.Verifier), oidc.Nonce(f.Nonce)))
}

// signInCallback handles GET /auth/callback: the provider's answer. It
// checks the state, exchanges the code with the PKCE verifier, verifies the
// ID token (signature, issuer, audience, expiry, nonce), maps its roles
// claim to a role and opens the session.
func (s *Server) signInCallback(c *gin.Context) {
	o := s.oidc
	if o == nil {
		s.notFound(c)
		return
	}
	refuse := func(err *apiError, why string, actor audit.Actor) {
		http.SetCookie(c.Writer, o.cookie(flowCookie, "", "/auth/", -1, true))
		c.Set(ctxPrincipal, &principal{actor: actor})
		c.Set(ctxAuditDetail, why)
		fail(c, err)
		s.record(c, "auth.signin", "dashboard", err.Status)
	}
	anon := audit.Actor{Kind: audit.ActorAnonymous, IP: c.ClientIP()}
	ck, err := c.Request.Cookie(flowCookie)
	var f signinFlow
	if err != nil || o.seal.open(flowCookie, ck.Value, &f) != nil || time.Now().Unix() > f.Expires {
		refuse(errSignIn, "no sign-in in progress (missing or expired flow cookie)", anon)
		return
	}
	if e := c.Query("error"); e != "" {
		refuse(errSignIn, "the provider answered "+truncate(e, 64), anon)
		return
	}
	if subtle.ConstantTimeCompare([]byte(c.Query("state")), []byte(f.State)) != 1 {
		refuse(errSignIn, "state does not match", anon)
		return
	}
	verifier, oc, err := o.discover(c.Request.Context())
	if err != nil {
		refuse(errSignIn, "provider unreachable", anon)
		return
	}
	ctx := oidc.ClientContext(c.Request.Context(), o.cfg.HTTPClient)
	tok, err := oc.Exchange(ctx, c.Query("code"), oauth2.VerifierOption(f.Verifier))
	if err != nil {
		refuse(errSignIn, "code exchange refused", anon)
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := verifier.Verify(ctx, raw)
	if err != nil {
		refuse(errSignIn, "ID token refused: "+truncate(err.Error(), 120), anon)
		return
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(f.Nonce)) != 1 {
		refuse(errSignIn, "ID token nonce does not match", anon)
		return
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		refuse(errSignIn, "ID token claims unreadable", anon)
		return
	}
	name, _ := claims["name"].(string)
	if email, _ := claims["email"].(string); name == "" {
		name = email
	}
	user := audit.Actor{Kind: audit.ActorUser, ID: idt.Subject, Name: name, IP: c.ClientIP()}
	role, queues, matched := o.role(claimValues(claims[o.cfg.RolesClaim]))
	if role == "" {
		refuse(errNoRole, "no mapped role in claim "+o.cfg.RolesClaim, user)
		return
	}
	now := time.Now().Unix()
	sess := &session{Subject: idt.Subject, Name: name, Role: role, Roles: matched, CSRF: randomToken(), Issued: now,
		Expires: now + int64(o.cfg.SessionIdle/time.Second), MaxAt: now + int64(o.cfg.SessionMax/time.Second)}
	if queues.Limited() {
		sess.Queues = queues.String()
	}
	sess.Expires = min(sess.Expires, sess.MaxAt)
	if err := o.setSession(c, sess); err != nil {
		fail(c, err)
		return
	}
	http.SetCookie(c.Writer, o.cookie(flowCookie, "", "/auth/", -1, true))
	c.Set(ctxPrincipal, &principal{actor: user})
	c.Set(ctxAuditDetail, "role "+role+" queues "+queues.String())
	s.record(c, "auth.signin", "dashboard", http.StatusFound)
	c.Header("Cache-Control", "no-store")
	c.Redirect(http.StatusFound, f.Next)
}

// signOut handles POST /auth/logout: it ends the session (its cookies) and
// answers 204. It needs the session's CSRF token, so that another site
// cannot sign a user out.
func (s *Server) signOut(c *gin.Context) {
	o := s.oidc
	if o == nil {
		s.notFound(c)
		return
	}
	p, sess, err := o.sessionPrincipal(c)
	if err == nil && p != nil {
		c.Set(ctxPrincipal, p)
		if err := checkCSRF(c, sess); err != nil {
			fail(c, err)
			s.record(c, "auth.signout", "dashboard", http.StatusForbidden)
			return
		}
	}
	http.SetCookie(c.Writer, o.cookie(sessionCookie, "", "/", -1, true))
	http.SetCookie(c.Writer, o.cookie(csrfCookie, "", "/", -1, false))
	if p != nil {
		s.record(c, "auth.signout", "dashboard", http.StatusNoContent)
	}
	c.Status(http.StatusNoContent)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// sessionView answers GET /v1/session: who the caller is.
type sessionView struct {
	Actor  audit.Actor `json:"actor"`
	Scopes []string    `json:"scopes"`
	// Queues are the patterns the caller is limited to, "*" for every queue.
	Queues string `json:"queues"`
	// SignIn says whether the dashboard's sign-in (OpenID Connect) is on.
	SignIn bool `json:"sign_in"`
}

// whoAmI handles GET /v1/session.
func (s *Server) whoAmI(c *gin.Context) {
	if err := checkQuery(c); err != nil {
		fail(c, err)
		return
	}
	p := principalOf(c)
	var scopes []string
	for _, sc := range []string{scopeRead, scopeSubmit, scopeWork, scopeOperate, scopeAdmin} {
		if p.allows(sc) {
			scopes = append(scopes, sc)
		}
	}
	c.JSON(http.StatusOK, sessionView{Actor: p.actor, Scopes: scopes, Queues: p.queues.String(), SignIn: s.oidc != nil})
}

// signInRoutes are the sign-in's routes; the /auth/ ones answer 404 when
// OpenID Connect is not configured.
func (s *Server) signInRoutes() []route {
	out := []route{
		{http.MethodGet, "/v1/session", s.whoAmI, operation{
			ID: "session", Tag: "operations", Summary: "Who the caller is",
			Description: "The caller as the API sees it: its actor (an API key by id, a signed-in user by subject and name), its scopes, the queue patterns it is limited to (\"*\": every queue), and whether the dashboard's sign-in is on.",
			Status:      http.StatusOK, Response: sessionView{}, Errors: []int{400},
		}},
	}
	return append(out,
		route{http.MethodGet, "/auth/login", s.signIn, operation{
			ID: "signIn", Tag: "operations", Summary: "Sign in to the dashboard (OpenID Connect)", Public: true,
			Description: "With sign-in configured (SUNDIAL_OIDC_ISSUER; 404 otherwise): redirects to the identity provider (authorization code flow with PKCE); ?next= is the dashboard's path to return to.",
			Query:       []param{{"next", "The path to return to after signing in.", textSchema, false}},
			Status:      http.StatusFound, ContentType: "text/html", Errors: []int{404, 503},
		}},
		route{http.MethodGet, "/auth/callback", s.signInCallback, operation{
			ID: "signInCallback", Tag: "operations", Summary: "The identity provider's answer", Public: true,
			Description: "Verifies the answer and the ID token, opens the session (cookies sundial_session, HttpOnly, and sundial_csrf) and redirects to the path of ?next=. 401 for a failed sign-in, 403 for a user without a mapped role.",
			Status:      http.StatusFound, ContentType: "text/html", Errors: []int{401, 403, 404},
		}},
		route{http.MethodPost, "/auth/logout", s.signOut, operation{
			ID: "signOut", Tag: "operations", Summary: "Sign out of the dashboard", Public: true,
			Description: "Ends the session: clears its cookies. Needs the X-CSRF-Token header of the session.",
			Status:      http.StatusNoContent, Errors: []int{403, 404},
		}},
	)
}
