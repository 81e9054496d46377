// Package oidctest runs a real OpenID Connect provider (zitadel/oidc's op
// package) for tests: an in-memory storage written for Sundial's tests, its
// own RSA signing key, PKCE and client secrets checked, and a login page of
// its own where a user name is typed. Tests of the dashboard's sign-in use it
// in-process (Start) and the browser tests as a process (./provider).
package oidctest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Provider is a running provider.
type Provider struct {
	// Issuer is its issuer URL (http://127.0.0.1:<port>).
	Issuer string
	store  *opStorage
	srv    *http.Server
}

// User is an account of the provider: its subject is its key in the users
// map, typed on the login page.
type User struct {
	Name, Email string
	// Groups is the "groups" claim of its ID tokens.
	Groups []string
}

// Client is the one client the provider knows.
type Client struct {
	ID, Secret, RedirectURI string
	// IDTokenLifetime is how long its ID tokens are valid; negative: they
	// have expired when issued. Default 5 minutes.
	IDTokenLifetime time.Duration
}

// Start runs a provider on addr ("127.0.0.1:0" for any port) until Close.
func Start(addr string, client Client, users map[string]User) (*Provider, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	issuer := "http://" + ln.Addr().String()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	if client.IDTokenLifetime == 0 {
		client.IDTokenLifetime = 5 * time.Minute
	}
	st := &opStorage{
		key:      key,
		keyID:    "test-key-1",
		users:    users,
		requests: map[string]*opAuthRequest{},
		codes:    map[string]string{},
		client: &opClient{id: client.ID, secret: client.Secret, redirect: client.RedirectURI, lifetime: client.IDTokenLifetime,
			login: func(id string) string { return issuer + "/login?id=" + id }},
	}
	var crypto [32]byte
	_, _ = rand.Read(crypto[:])
	provider, err := op.NewProvider(&op.Config{CryptoKey: crypto, CodeMethodS256: true, AuthMethodPost: true}, st, op.StaticIssuer(issuer), op.WithAllowInsecure())
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html lang="en"><title>Test provider: sign in</title><main><h1>Sign in</h1>
<form method="post" action="/login"><input type="hidden" name="id" value="%s">
<label for="username">User name</label><input id="username" name="username" autocomplete="username">
<button type="submit">Sign in</button></form></main></html>`, html.EscapeString(r.URL.Query().Get("id")))
	})
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		id, user := r.FormValue("id"), r.FormValue("username")
		if err := st.login(id, user); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		http.Redirect(w, r, issuer+"/authorize/callback?id="+id, http.StatusFound)
	})
	mux.Handle("/", provider)
	p := &Provider{Issuer: issuer, store: st, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Close stops the provider.
func (p *Provider) Close() error { return p.srv.Close() }

// opStorage is the provider's op.Storage, in memory.
type opStorage struct {
	key    *rsa.PrivateKey
	keyID  string
	client *opClient
	users  map[string]User

	mu       sync.Mutex
	requests map[string]*opAuthRequest
	codes    map[string]string // code → request id
	seq      int
}

type opNotFound struct{ error }

func (opNotFound) IsNotFound() {}

func (s *opStorage) login(id, user string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[id]
	if !ok {
		return errors.New("no such sign-in")
	}
	if _, ok := s.users[user]; !ok {
		return errors.New("unknown user")
	}
	r.subject, r.done, r.authTime = user, true, time.Now()
	return nil
}

func (s *opStorage) CreateAuthRequest(_ context.Context, ar *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	r := &opAuthRequest{id: fmt.Sprintf("ar-%d", s.seq), clientID: ar.ClientID, redirectURI: ar.RedirectURI, scopes: ar.Scopes,
		state: ar.State, nonce: ar.Nonce, responseType: ar.ResponseType, responseMode: ar.ResponseMode}
	if ar.CodeChallenge != "" {
		r.challenge = &oidc.CodeChallenge{Challenge: ar.CodeChallenge, Method: ar.CodeChallengeMethod}
	}
	s.requests[r.id] = r
	return r, nil
}

func (s *opStorage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.requests[id]; ok {
		return r, nil
	}
	return nil, opNotFound{errors.New("auth request not found")}
}

func (s *opStorage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	id, ok := s.codes[code]
	s.mu.Unlock()
	if !ok {
		return nil, opNotFound{errors.New("code not found")}
	}
	return s.AuthRequestByID(ctx, id)
}

func (s *opStorage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = id
	return nil
}

func (s *opStorage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requests, id)
	for c, rid := range s.codes {
		if rid == id {
			delete(s.codes, c)
		}
	}
	return nil
}

func (s *opStorage) CreateAccessToken(context.Context, op.TokenRequest) (string, time.Time, error) {
	return fmt.Sprintf("at-%d", time.Now().UnixNano()), time.Now().Add(5 * time.Minute), nil
}

func (s *opStorage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, errors.New("no refresh tokens")
}

func (s *opStorage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, op.ErrInvalidRefreshToken
}

func (s *opStorage) TerminateSession(context.Context, string, string) error { return nil }

func (s *opStorage) RevokeToken(context.Context, string, string, string) *oidc.Error { return nil }

func (s *opStorage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

func (s *opStorage) SigningKey(context.Context) (op.SigningKey, error) { return opKey{s}, nil }

func (s *opStorage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *opStorage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{opPublicKey{opKey{s}}}, nil
}

func (s *opStorage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	if id != s.client.id {
		return nil, opNotFound{errors.New("client not found")}
	}
	return s.client, nil
}

func (s *opStorage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	if id != s.client.id || secret != s.client.secret {
		return errors.New("invalid client")
	}
	return nil
}

func (s *opStorage) setUser(ui *oidc.UserInfo, sub string) error {
	u, ok := s.users[sub]
	if !ok {
		return opNotFound{errors.New("user not found")}
	}
	ui.Subject = sub
	ui.Name = u.Name
	ui.Email = u.Email
	if u.Groups != nil {
		ui.AppendClaims("groups", u.Groups)
	}
	return nil
}

func (s *opStorage) SetUserinfoFromScopes(_ context.Context, ui *oidc.UserInfo, sub, _ string, _ []string) error {
	return s.setUser(ui, sub)
}

func (s *opStorage) SetUserinfoFromToken(_ context.Context, ui *oidc.UserInfo, _, sub, _ string) error {
	return s.setUser(ui, sub)
}

func (s *opStorage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return nil
}

func (s *opStorage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s *opStorage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("no JWT profile keys")
}

func (s *opStorage) ValidateJWTProfileScopes(_ context.Context, _ string, scopes []string) ([]string, error) {
	return scopes, nil
}

func (s *opStorage) Health(context.Context) error { return nil }

// opKey is the provider's RSA key, as a signing key and in the key set.
type opKey struct{ s *opStorage }

func (k opKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k opKey) Algorithm() jose.SignatureAlgorithm          { return jose.RS256 }
func (k opKey) ID() string                                  { return k.s.keyID }
func (k opKey) Use() string                                 { return "sig" }

// Key is the private key, for signing.
func (k opKey) Key() any { return k.s.key }

// opPublicKey is the key as the key set (JWKS) publishes it.
type opPublicKey struct{ opKey }

func (k opPublicKey) Key() any { return &k.s.key.PublicKey }

// opClient is the API as a client of the provider.
type opClient struct {
	id, secret, redirect string
	lifetime             time.Duration
	login                func(string) string
}

func (c *opClient) GetID() string                       { return c.id }
func (c *opClient) RedirectURIs() []string              { return []string{c.redirect} }
func (c *opClient) PostLogoutRedirectURIs() []string    { return nil }
func (c *opClient) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c *opClient) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c *opClient) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *opClient) GrantTypes() []oidc.GrantType        { return []oidc.GrantType{oidc.GrantTypeCode} }
func (c *opClient) LoginURL(id string) string           { return c.login(id) }
func (c *opClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeBearer }
func (c *opClient) IDTokenLifetime() time.Duration      { return c.lifetime }
func (c *opClient) DevMode() bool                       { return true }
func (c *opClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *opClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *opClient) IsScopeAllowed(string) bool           { return false }
func (c *opClient) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c *opClient) ClockSkew() time.Duration             { return 0 }

// opAuthRequest is one sign-in at the provider.
type opAuthRequest struct {
	id, clientID, redirectURI, state, nonce, subject string
	scopes                                           []string
	responseType                                     oidc.ResponseType
	responseMode                                     oidc.ResponseMode
	challenge                                        *oidc.CodeChallenge
	done                                             bool
	authTime                                         time.Time
}

func (r *opAuthRequest) GetID() string                         { return r.id }
func (r *opAuthRequest) GetACR() string                        { return "" }
func (r *opAuthRequest) GetAMR() []string                      { return []string{"pwd"} }
func (r *opAuthRequest) GetAudience() []string                 { return []string{r.clientID} }
func (r *opAuthRequest) GetAuthTime() time.Time                { return r.authTime }
func (r *opAuthRequest) GetClientID() string                   { return r.clientID }
func (r *opAuthRequest) GetCodeChallenge() *oidc.CodeChallenge { return r.challenge }
func (r *opAuthRequest) GetNonce() string                      { return r.nonce }
func (r *opAuthRequest) GetRedirectURI() string                { return r.redirectURI }
func (r *opAuthRequest) GetResponseType() oidc.ResponseType    { return r.responseType }
func (r *opAuthRequest) GetResponseMode() oidc.ResponseMode    { return r.responseMode }
func (r *opAuthRequest) GetScopes() []string                   { return r.scopes }
func (r *opAuthRequest) GetState() string                      { return r.state }
func (r *opAuthRequest) GetSubject() string                    { return r.subject }
func (r *opAuthRequest) Done() bool                            { return r.done }

// SignIDToken returns an ID token for sub signed with the provider's key,
// as its token endpoint signs them, for tests of verification.
func (p *Provider) SignIDToken(sub string) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: p.store.key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", p.store.keyID))
	if err != nil {
		return "", err
	}
	now := time.Now().Unix()
	claims, _ := json.Marshal(map[string]any{"iss": p.Issuer, "sub": sub, "aud": p.store.client.id, "iat": now, "exp": now + 300})
	sig, err := signer.Sign(claims)
	if err != nil {
		return "", err
	}
	return sig.CompactSerialize()
}
