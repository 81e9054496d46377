package httpapi

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// Cookies of the dashboard's sign-in (OpenID Connect).
const (
	// sessionCookie holds the signed-in user's session, sealed (AES-GCM):
	// HttpOnly, SameSite=Lax, Secure behind https.
	sessionCookie = "sundial_session"
	// csrfCookie holds the session's CSRF token for the dashboard's script
	// to send back as csrfHeader (double submit); not HttpOnly.
	csrfCookie = "sundial_csrf"
	// flowCookie holds a sign-in in progress (state, nonce, PKCE verifier,
	// where to go after), sealed, for flowTTL, on /auth/ only.
	flowCookie = "sundial_signin"
	// csrfHeader carries the CSRF token on every state-changing request
	// authenticated by the session cookie.
	csrfHeader = "X-CSRF-Token"
)

// flowTTL bounds a sign-in at the provider.
const flowTTL = 10 * time.Minute

// session is what the session cookie holds.
type session struct {
	Subject string   `json:"sub"`
	Name    string   `json:"name,omitempty"`
	Role    string   `json:"role"`
	Queues  string   `json:"queues,omitempty"` // access.Patterns syntax; "" for every queue
	Roles   []string `json:"roles,omitempty"`  // the claim's values that matched, for the audit log
	CSRF    string   `json:"csrf"`
	Issued  int64    `json:"iat"` // when the cookie was last written (Unix s)
	Expires int64    `json:"exp"` // idle expiry (Unix s), pushed on by renewal
	MaxAt   int64    `json:"max"` // absolute expiry (Unix s): sign in again after
}

// signinFlow is what the flow cookie holds.
type signinFlow struct {
	State    string `json:"state"`
	Nonce    string `json:"nonce"`
	Verifier string `json:"verifier"`
	Next     string `json:"next"`
	Expires  int64  `json:"exp"`
}

// sealer seals and opens cookie values with AES-256-GCM; the cookie's name
// is the additional data, so that one cookie's value cannot pass for
// another's.
type sealer struct{ aead cipher.AEAD }

func newSealer(secret []byte) (*sealer, error) {
	if len(secret) < 16 {
		return nil, errors.New("the session secret must be at least 16 bytes")
	}
	key := sha256.Sum256(append([]byte("sundial session v1\x00"), secret...))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

func (s *sealer) seal(name string, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(name))), nil
}

var errBadCookie = errors.New("cookie not sealed by this API")

func (s *sealer) open(name, value string, v any) error {
	data, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(data) < s.aead.NonceSize() {
		return errBadCookie
	}
	plain, err := s.aead.Open(nil, data[:s.aead.NonceSize()], data[s.aead.NonceSize():], []byte(name))
	if err != nil {
		return errBadCookie
	}
	return json.Unmarshal(plain, v)
}

// randomToken returns 32 random bytes, base64url.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// cookie builds one of the sign-in's cookies.
func (o *oidcAuth) cookie(name, value, path string, maxAge int, httpOnly bool) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: path, MaxAge: maxAge, HttpOnly: httpOnly,
		Secure: o.secure, SameSite: http.SameSiteLaxMode}
}
