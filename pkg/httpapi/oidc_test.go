package httpapi

import (
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/mongotest"
	"github.com/sundialhq/sundial/internal/oidctest"
	"github.com/sundialhq/sundial/pkg/audit"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

const (
	oidcClientID = "sundial-dashboard"
	oidcSecret   = "client-secret-0123456789abcdef"
)

var oidcUsers = map[string]oidctest.User{
	"ann":   {Name: "Ann Admin", Email: "ann@example.com", Groups: []string{"sundial-admins"}},
	"otto":  {Name: "Otto Operator", Email: "otto@example.com", Groups: []string{"billing-team"}},
	"vera":  {Name: "Vera Viewer", Email: "vera@example.com", Groups: []string{"staff"}},
	"nobby": {Name: "Nobby Nobody", Email: "nobby@example.com", Groups: []string{"other"}},
}

// startSignIn runs a real provider and an API whose dashboard signs in
// with it (an audit store too); idTokenLifetime is the provider's.
func startSignIn(t *testing.T, idTokenLifetime time.Duration) (*testAPI, *oidctest.Provider, *audit.Store) {
	t.Helper()
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	p, err := oidctest.Start("127.0.0.1:0", oidctest.Client{ID: oidcClientID, Secret: oidcSecret, RedirectURI: base + "/auth/callback", IDTokenLifetime: idTokenLifetime}, oidcUsers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	roles, err := ParseRoleMappings("sundial-admins=admin,billing-team=operator@billing-*,staff=viewer")
	if err != nil {
		t.Fatal(err)
	}
	_, db := mongotest.Client(t)
	store := audit.NewStore(db, audit.StoreOptions{})
	a := startListener(t, queuetest.Start(t), ln, func(c *Config) {
		c.APIKeys = []string{"program-key"}
		c.Audit, c.AuditLog = store, store
		c.OIDC = &OIDCConfig{Issuer: p.Issuer, ClientID: oidcClientID, ClientSecret: oidcSecret, RedirectURL: base + "/auth/callback", Roles: roles}
	})
	return a, p, store
}

// browser is an HTTP client with cookies, as a browser signs in.
type browser struct {
	t   *testing.T
	a   *testAPI
	c   *http.Client
	jar *cookiejar.Jar
}

func newBrowser(t *testing.T, a *testAPI) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, a: a, jar: jar, c: &http.Client{Jar: jar, Transport: a.client.Transport, Timeout: 10 * time.Second}}
}

// signIn goes through the provider's pages as user and returns the last
// answer (the dashboard after the redirects, or an error).
func (b *browser) signIn(user, next string) (*http.Response, string) {
	b.t.Helper()
	res, err := b.c.Get(b.a.base + "/auth/login?next=" + url.QueryEscape(next))
	if err != nil {
		b.t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := regexp.MustCompile(`name="id" value="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		b.t.Fatalf("no login form at %s: %d %s", res.Request.URL, res.StatusCode, page)
	}
	res, err = b.c.PostForm(res.Request.URL.Scheme+"://"+res.Request.URL.Host+"/login", url.Values{"id": {string(m[1])}, "username": {user}})
	if err != nil {
		b.t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(body)
}

func (b *browser) cookie(name string) string {
	u, _ := url.Parse(b.a.base)
	for _, c := range b.jar.Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

func (b *browser) do(method, path string, hdr ...string) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequest(method, b.a.base+path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(data)
}

// TestSignIn: a user signs in through a real OpenID provider's pages; the
// role comes from the groups claim; the session cookie is HttpOnly and
// SameSite=Lax; state-changing requests need the CSRF header; a forged or
// tampered cookie is refused; sign-out ends the session; keys keep
// working; each sign-in, sign-out and refusal is in the audit log.
func TestSignIn(t *testing.T) {
	a, _, store := startSignIn(t, 5*time.Minute)

	// Without a key or a session: 401 with where to sign in.
	res := a.do("GET", "/v1/queues", nil)
	if res.status != 401 || res.header.Get(signInHeader) != "/auth/login" {
		t.Fatalf("no credentials: %d %q", res.status, res.header.Get(signInHeader))
	}

	b := newBrowser(t, a)
	r, _ := b.signIn("ann", "/queues")
	if r.StatusCode != 200 || r.Request.URL.Path != "/queues" {
		t.Fatalf("after sign-in: %d at %s", r.StatusCode, r.Request.URL)
	}
	var setCookie string
	for _, h := range r.Request.Response.Header.Values("Set-Cookie") {
		if strings.HasPrefix(h, sessionCookie+"=") {
			setCookie = h
		}
	}
	if !strings.Contains(setCookie, "HttpOnly") || !strings.Contains(setCookie, "SameSite=Lax") || !strings.Contains(setCookie, "Max-Age=") {
		t.Errorf("session cookie %q: want HttpOnly, SameSite=Lax, Max-Age", setCookie)
	}
	status, body := b.do("GET", "/v1/session")
	if status != 200 || !strings.Contains(body, `"kind":"user"`) || !strings.Contains(body, `"name":"Ann Admin"`) || !strings.Contains(body, `"admin"`) {
		t.Fatalf("session: %d %s", status, body)
	}
	// CSRF: a state-changing request with the cookie alone is refused.
	if status, body = b.do("POST", "/v1/queues/mail/pause"); status != 403 || !strings.Contains(body, csrfHeader) {
		t.Errorf("pause without CSRF header: %d %s", status, body)
	}
	if status, _ = b.do("POST", "/v1/queues/mail/pause", csrfHeader, "wrong"); status != 403 {
		t.Errorf("pause with a wrong CSRF header: %d", status)
	}
	if status, body = b.do("POST", "/v1/queues/mail/pause", csrfHeader, b.cookie(csrfCookie)); status != 200 {
		t.Errorf("pause with the CSRF header: %d %s", status, body)
	}
	// The pause names the user in the audit log; the refusals too.
	recs := records(t, store, audit.Query{Action: "queue.pause"})
	if len(recs) != 3 || recs[0].Actor.Kind != audit.ActorUser || recs[0].Actor.ID != "ann" || recs[0].Actor.Name != "Ann Admin" ||
		recs[0].Outcome != audit.OutcomeOK || recs[1].Outcome != audit.OutcomeRefused || recs[2].Outcome != audit.OutcomeRefused {
		t.Errorf("pause records: %+v", recs)
	}
	if recs := records(t, store, audit.Query{Action: "auth.signin"}); len(recs) != 1 || recs[0].Actor.ID != "ann" || recs[0].Outcome != audit.OutcomeOK {
		t.Errorf("sign-in records: %+v", recs)
	}

	// A tampered session cookie is refused.
	sess := b.cookie(sessionCookie)
	raw, _ := base64.RawURLEncoding.DecodeString(sess)
	raw[len(raw)-3] ^= 1
	u, _ := url.Parse(a.base)
	forged, _ := cookiejar.New(nil)
	forged.SetCookies(u, []*http.Cookie{{Name: sessionCookie, Value: base64.RawURLEncoding.EncodeToString(raw)}})
	fb := &browser{t: t, a: a, jar: forged, c: &http.Client{Jar: forged, Transport: a.client.Transport}}
	if status, body = fb.do("GET", "/v1/session"); status != 401 || !strings.Contains(body, "sign in again") {
		t.Errorf("tampered cookie: %d %s", status, body)
	}
	// A cookie sealed with another secret (another API's) is refused.
	other, _ := newSealer([]byte("another-secret-of-sixteen+"))
	v, _ := other.seal(sessionCookie, session{Subject: "ann", Role: RoleAdmin, CSRF: "x", Issued: time.Now().Unix(), Expires: time.Now().Add(time.Hour).Unix(), MaxAt: time.Now().Add(time.Hour).Unix()})
	forged.SetCookies(u, []*http.Cookie{{Name: sessionCookie, Value: v}})
	if status, _ = fb.do("GET", "/v1/session"); status != 401 {
		t.Errorf("cookie of another secret: %d", status)
	}
	// An expired session is refused.
	v, _ = a.s.oidc.seal.seal(sessionCookie, session{Subject: "ann", Role: RoleAdmin, CSRF: "x", Issued: time.Now().Add(-2 * time.Hour).Unix(), Expires: time.Now().Add(-time.Hour).Unix(), MaxAt: time.Now().Add(time.Hour).Unix()})
	forged.SetCookies(u, []*http.Cookie{{Name: sessionCookie, Value: v}})
	if status, _ = fb.do("GET", "/v1/session"); status != 401 {
		t.Errorf("expired session: %d", status)
	}

	// API keys keep working beside the sign-in.
	a.as("program-key", "GET", "/v1/queues", nil).decode(t, 200, nil)

	// Sign-out needs the CSRF header, then ends the session.
	if status, _ = b.do("POST", "/auth/logout"); status != 403 {
		t.Errorf("sign-out without CSRF: %d", status)
	}
	if status, _ = b.do("POST", "/auth/logout", csrfHeader, b.cookie(csrfCookie)); status != 204 {
		t.Errorf("sign-out: %d", status)
	}
	if status, _ = b.do("GET", "/v1/session"); status != 401 {
		t.Errorf("after sign-out: %d", status)
	}
	if recs := records(t, store, audit.Query{Action: "auth.signout"}); len(recs) != 2 || recs[0].Outcome != audit.OutcomeOK || recs[1].Outcome != audit.OutcomeRefused {
		t.Errorf("sign-out records: %+v", recs)
	}
	// Nothing secret in the audit log: no cookie, no client secret.
	for _, r := range records(t, store, audit.Query{}) {
		for _, secret := range []string{sess, oidcSecret, "program-key"} {
			if strings.Contains(r.Detail+r.Filter+r.Target+r.Actor.ID, secret) {
				t.Errorf("audit record holds a secret: %+v", r)
			}
		}
	}
}

// TestSignInRoles: the provider's groups claim decides the role: a viewer
// reads only, an operator acts on jobs and queues of its patterns only and
// cannot touch limits or read the audit log, and a user without a mapped
// role is refused.
func TestSignInRoles(t *testing.T) {
	a, _, store := startSignIn(t, 5*time.Minute)
	a.as("program-key", "POST", "/v1/jobs", map[string]any{"queue": "billing-eu", "type": "x", "delay_seconds": 3600}).decode(t, 201, nil)
	a.as("program-key", "POST", "/v1/jobs", map[string]any{"queue": "ops-main", "type": "x", "delay_seconds": 3600}).decode(t, 201, nil)

	vera := newBrowser(t, a)
	vera.signIn("vera", "/")
	csrf := vera.cookie(csrfCookie)
	if status, _ := vera.do("GET", "/v1/queues"); status != 200 {
		t.Errorf("viewer reads: %d", status)
	}
	if status, _ := vera.do("POST", "/v1/queues/billing-eu/pause", csrfHeader, csrf); status != 403 {
		t.Errorf("viewer pauses: %d", status)
	}

	otto := newBrowser(t, a)
	otto.signIn("otto", "/")
	csrf = otto.cookie(csrfCookie)
	_, body := otto.do("GET", "/v1/session")
	if !strings.Contains(body, `"queues":"billing-*"`) || !strings.Contains(body, `"operate"`) || strings.Contains(body, `"admin"`) {
		t.Errorf("operator session: %s", body)
	}
	if _, body = otto.do("GET", "/v1/queues"); strings.Contains(body, "ops-main") || !strings.Contains(body, "billing-eu") {
		t.Errorf("operator queues: %s", body)
	}
	if status, _ := otto.do("POST", "/v1/queues/billing-eu/pause", csrfHeader, csrf); status != 200 {
		t.Errorf("operator pauses its queue: %d", status)
	}
	if status, _ := otto.do("POST", "/v1/queues/ops-main/pause", csrfHeader, csrf); status != 404 {
		t.Errorf("operator pauses another team's queue: %d", status)
	}
	if status, _ := otto.do("DELETE", "/v1/queues/billing-eu/limits/x", csrfHeader, csrf); status != 403 {
		t.Errorf("operator deletes a limit: %d", status)
	}
	if status, _ := otto.do("GET", "/v1/audit"); status != 403 {
		t.Errorf("operator reads the audit log: %d", status)
	}

	nobby := newBrowser(t, a)
	r, body := nobby.signIn("nobby", "/")
	if r.StatusCode != 403 || !strings.Contains(body, "no role") || nobby.cookie(sessionCookie) != "" {
		t.Errorf("user without a role: %d %s", r.StatusCode, body)
	}
	recs := records(t, store, audit.Query{Action: "auth.signin", Actor: "nobby"})
	if len(recs) != 1 || recs[0].Outcome != audit.OutcomeRefused {
		t.Errorf("refused sign-in record: %+v", recs)
	}
	// The next parameter cannot send the browser to another site.
	for _, next := range []string{"//evil.example/x", "https://evil.example/", "/\\evil"} {
		if got := safeNext(next); got != "/" {
			t.Errorf("safeNext(%q) = %q", next, got)
		}
	}
}

// TestSignInExpiredToken: an ID token that has expired when it arrives is
// refused, and no session opens.
func TestSignInExpiredToken(t *testing.T) {
	a, _, store := startSignIn(t, -time.Minute)
	b := newBrowser(t, a)
	r, body := b.signIn("ann", "/")
	if r.StatusCode != 401 || b.cookie(sessionCookie) != "" {
		t.Fatalf("expired ID token: %d %s", r.StatusCode, body)
	}
	recs := records(t, store, audit.Query{Action: "auth.signin"})
	if len(recs) != 1 || recs[0].Outcome != audit.OutcomeRefused || !strings.Contains(recs[0].Detail, "expired") {
		t.Errorf("records: %+v", recs)
	}
}

// TestSignInTamperedToken: an ID token the provider signed, with its
// payload changed, fails verification; so does one whose signature is
// another key's.
func TestSignInTamperedToken(t *testing.T) {
	a, p, _ := startSignIn(t, 5*time.Minute)
	verifier, _, err := a.s.oidc.discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := p.SignIDToken("ann")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verifier.Verify(context.Background(), tok); err != nil {
		t.Fatalf("the provider's own token: %v", err)
	}
	parts := strings.Split(tok, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	payload = []byte(strings.Replace(string(payload), `"sub":"ann"`, `"sub":"eve"`, 1))
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)
	if _, err := verifier.Verify(context.Background(), strings.Join(parts, ".")); err == nil {
		t.Error("a tampered ID token was accepted")
	}
}
