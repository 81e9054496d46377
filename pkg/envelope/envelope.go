// Package envelope encrypts job payloads, results and error text on the
// client side, before they reach the API or Redis: AES-256-GCM under a
// fresh data key per value, the data key wrapped by a named key of the
// operator's Keyring. The key id travels with the value, so keys rotate
// without re-encrypting what was written before (docs/payloads.md,
// "Encryption").
package envelope

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Field is the one key of the JSON object an encrypted value is.
const Field = "$sundial_enc"

// TextPrefix starts the string an encrypted text (a job's error) is: the
// prefix, then the standard base64 of the encrypted value's JSON.
const TextPrefix = "$sundial_enc:"

// Version is the envelope format this package writes and reads.
const Version = 1

// What names the part of a job a value is (bound into the ciphertext, so
// that a result cannot be passed off as a payload).
const (
	Payload = "payload"
	Result  = "result"
	Error   = "error"
)

const (
	keySize   = 32
	nonceSize = 12
)

// sealed is the object under Field.
type sealed struct {
	V   int    `json:"v"`
	Kid string `json:"kid"`
	DEK string `json:"dek"`
	IV  string `json:"iv"`
	CT  string `json:"ct"`
}

type value struct {
	Enc *sealed `json:"$sundial_enc"`
}

// MissingKeyError is the error of opening a value whose key id the
// keyring lacks.
type MissingKeyError struct {
	What  string // Payload, Result or Error
	KeyID string
}

func (e *MissingKeyError) Error() string {
	return fmt.Sprintf("%s encrypted with key %q, which this keyring lacks", e.What, e.KeyID)
}

// OpenError is the error of a value that does not decrypt under the key
// its id names, or is not a well-formed envelope: tampered with, cut, or
// sealed under another key of the same id.
type OpenError struct {
	What   string
	KeyID  string // empty when the envelope did not name one
	Reason string
}

func (e *OpenError) Error() string {
	if e.KeyID == "" {
		return fmt.Sprintf("%s is not a valid encrypted value: %s", e.What, e.Reason)
	}
	return fmt.Sprintf("%s encrypted with key %q does not decrypt: %s", e.What, e.KeyID, e.Reason)
}

// IsEncrypted reports whether v, a JSON value, is an encrypted value: an
// object whose only key is Field. It looks at the first bytes only, so
// plain payloads cost next to nothing.
func IsEncrypted(v []byte) bool {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 || v[0] != '{' {
		return false
	}
	v = bytes.TrimLeft(v[1:], " \t\r\n")
	return bytes.HasPrefix(v, []byte(`"`+Field+`"`))
}

// IsEncryptedText reports whether s is an encrypted text (SealText).
func IsEncryptedText(s string) bool { return strings.HasPrefix(s, TextPrefix) }

// KeyID returns the key id an encrypted value names, or false for a value
// that is not one.
func KeyID(v []byte) (string, bool) {
	s, err := parse("value", v)
	if err != nil {
		return "", false
	}
	return s.Kid, true
}

// Seal encrypts plaintext (JSON text: the payload or result) as what
// (Payload, Result) under a fresh data key wrapped by the keyring's
// primary key, and returns the encrypted value's JSON.
func (k *Keyring) Seal(what string, plaintext []byte) ([]byte, error) {
	if k == nil || k.primary == "" {
		return nil, errors.New("envelope: no keyring to encrypt with")
	}
	kek := k.keys[k.primary]
	dek := make([]byte, keySize)
	if _, err := rand.Read(dek); err != nil {
		return nil, err
	}
	wrapped, err := seal(kek, dek, []byte("sundial.dek:"+k.primary))
	if err != nil {
		return nil, err
	}
	ct, err := seal(dek, plaintext, []byte("sundial:"+what))
	if err != nil {
		return nil, err
	}
	b64 := base64.StdEncoding.EncodeToString
	return json.Marshal(value{Enc: &sealed{V: Version, Kid: k.primary, DEK: b64(wrapped),
		IV: b64(ct[:nonceSize]), CT: b64(ct[nonceSize:])}})
}

// Open decrypts an encrypted value sealed as what and returns its
// plaintext JSON. A key id the keyring lacks is a *MissingKeyError;
// anything that does not decrypt is an *OpenError.
func (k *Keyring) Open(what string, v []byte) ([]byte, error) {
	s, err := parse(what, v)
	if err != nil {
		return nil, err
	}
	var kek []byte
	if k != nil {
		kek = k.keys[s.Kid]
	}
	if kek == nil {
		return nil, &MissingKeyError{What: what, KeyID: s.Kid}
	}
	bad := func(reason string) error { return &OpenError{What: what, KeyID: s.Kid, Reason: reason} }
	wrapped, err1 := base64.StdEncoding.DecodeString(s.DEK)
	iv, err2 := base64.StdEncoding.DecodeString(s.IV)
	ct, err3 := base64.StdEncoding.DecodeString(s.CT)
	if err := errors.Join(err1, err2, err3); err != nil || len(iv) != nonceSize || len(wrapped) < nonceSize {
		return nil, bad("malformed dek, iv or ct")
	}
	dek, err := open(kek, wrapped[:nonceSize], wrapped[nonceSize:], []byte("sundial.dek:"+s.Kid))
	if err != nil || len(dek) != keySize {
		return nil, bad("the data key does not unwrap (tampered with, or another key under this id)")
	}
	pt, err := open(dek, iv, ct, []byte("sundial:"+what))
	if err != nil {
		return nil, bad("the ciphertext does not authenticate (tampered with)")
	}
	return pt, nil
}

// SealText encrypts a text (a job's error) as what (Error) and returns
// TextPrefix followed by the encrypted value's JSON in base64.
func (k *Keyring) SealText(what, text string) (string, error) {
	pt, err := json.Marshal(text)
	if err != nil {
		return "", err
	}
	v, err := k.Seal(what, pt)
	if err != nil {
		return "", err
	}
	return TextPrefix + base64.StdEncoding.EncodeToString(v), nil
}

// OpenText decrypts a text SealText made. Text around it that is not
// encrypted is kept: a worker may prefix an encrypted error with its own
// words ("timeout after 30s: $sundial_enc:…"). Text without TextPrefix is
// returned as it is.
func (k *Keyring) OpenText(what, text string) (string, error) {
	i := strings.Index(text, TextPrefix)
	if i < 0 {
		return text, nil
	}
	raw, err := base64.StdEncoding.DecodeString(text[i+len(TextPrefix):])
	if err != nil {
		return "", &OpenError{What: what, Reason: "not base64"}
	}
	pt, err := k.Open(what, raw)
	if err != nil {
		return "", err
	}
	var s string
	if err := json.Unmarshal(pt, &s); err != nil {
		return "", &OpenError{What: what, Reason: "not a JSON string"}
	}
	return text[:i] + s, nil
}

// TextKeyID returns the key id of an encrypted text, or false.
func TextKeyID(text string) (string, bool) {
	i := strings.Index(text, TextPrefix)
	if i < 0 {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(text[i+len(TextPrefix):])
	if err != nil {
		return "", false
	}
	return KeyID(raw)
}

func parse(what string, v []byte) (*sealed, error) {
	var x value
	d := json.NewDecoder(bytes.NewReader(v))
	d.DisallowUnknownFields()
	if err := d.Decode(&x); err != nil || x.Enc == nil {
		return nil, &OpenError{What: what, Reason: "not an encrypted value"}
	}
	if x.Enc.V != Version {
		return nil, &OpenError{What: what, KeyID: x.Enc.Kid, Reason: fmt.Sprintf("envelope version %d, this release reads %d", x.Enc.V, Version)}
	}
	if !ValidKeyID(x.Enc.Kid) {
		return nil, &OpenError{What: what, Reason: "no valid key id"}
	}
	return x.Enc, nil
}

// seal returns nonce ‖ AES-256-GCM(key).Seal(plaintext, aad).
func seal(key, plaintext, aad []byte) ([]byte, error) {
	g, err := gcm(key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, nonceSize, nonceSize+len(plaintext)+g.Overhead())
	if _, err := rand.Read(out); err != nil {
		return nil, err
	}
	return g.Seal(out, out, plaintext, aad), nil
}

func open(key, nonce, ct, aad []byte) ([]byte, error) {
	g, err := gcm(key)
	if err != nil {
		return nil, err
	}
	return g.Open(nil, nonce, ct, aad)
}

func gcm(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}
