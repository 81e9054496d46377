package envelope

import (
	"encoding/base64"
	"fmt"
	"os"
	"strings"
)

// Keyring holds named 32-byte keys: the primary one encrypts, every one
// decrypts what was sealed under its id. Rotate by adding a key and making
// it primary while keeping the old ones. A Keyring never prints its keys.
type Keyring struct {
	keys    map[string][]byte
	ids     []string
	primary string
}

// The variables FromEnv reads.
const (
	EnvKeyring     = "SUNDIAL_KEYRING"
	EnvKeyringFile = "SUNDIAL_KEYRING_FILE"
	EnvPrimary     = "SUNDIAL_KEYRING_PRIMARY"
)

// ValidKeyID reports whether id is a valid key id: 1 to 64 of
// [A-Za-z0-9_.-].
func ValidKeyID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// Parse reads a keyring written as "id:base64" entries separated by
// commas or newlines (blank lines and lines starting with # are skipped);
// each key decodes to 32 bytes. The primary key is primary, or the last
// entry when primary is empty. Errors name key ids, never key material.
func Parse(s, primary string) (*Keyring, error) {
	k := &Keyring{keys: map[string][]byte{}}
	for n, e := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' }) {
		e = strings.TrimSpace(e)
		if e == "" || strings.HasPrefix(e, "#") {
			continue
		}
		id, b64, ok := strings.Cut(e, ":")
		id = strings.TrimSpace(id)
		if !ok || !ValidKeyID(id) {
			return nil, fmt.Errorf("keyring entry %d: want id:base64 with an id of 1 to 64 of [A-Za-z0-9_.-]", n+1)
		}
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
		if err != nil || len(key) != keySize {
			return nil, fmt.Errorf("keyring key %q: want the standard base64 of 32 bytes", id)
		}
		if _, dup := k.keys[id]; dup {
			return nil, fmt.Errorf("keyring key %q is listed twice", id)
		}
		k.keys[id] = key
		k.ids = append(k.ids, id)
	}
	if len(k.ids) == 0 {
		return nil, fmt.Errorf("keyring has no key")
	}
	k.primary = k.ids[len(k.ids)-1]
	if primary != "" {
		if _, ok := k.keys[primary]; !ok {
			return nil, fmt.Errorf("keyring primary %q is not a key of the keyring", primary)
		}
		k.primary = primary
	}
	return k, nil
}

// FromEnv reads the keyring from SUNDIAL_KEYRING, or from the file
// SUNDIAL_KEYRING_FILE names (one id:base64 a line), with
// SUNDIAL_KEYRING_PRIMARY naming the primary key (default: the last). It
// returns nil and no error when neither is set. getenv is os.Getenv or a
// test's stand-in.
func FromEnv(getenv func(string) string) (*Keyring, error) {
	s, file, primary := getenv(EnvKeyring), getenv(EnvKeyringFile), getenv(EnvPrimary)
	switch {
	case s != "" && file != "":
		return nil, fmt.Errorf("%s and %s are both set: set one", EnvKeyring, EnvKeyringFile)
	case s == "" && file == "":
		if primary != "" {
			return nil, fmt.Errorf("%s is set without %s or %s", EnvPrimary, EnvKeyring, EnvKeyringFile)
		}
		return nil, nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvKeyringFile, err)
		}
		k, err := Parse(string(b), primary)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvKeyringFile, err)
		}
		return k, nil
	}
	k, err := Parse(s, primary)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvKeyring, err)
	}
	return k, nil
}

// Primary returns the id of the key that encrypts.
func (k *Keyring) Primary() string { return k.primary }

// IDs returns the key ids, in the order given.
func (k *Keyring) IDs() []string { return append([]string(nil), k.ids...) }

// Has reports whether the keyring holds key id.
func (k *Keyring) Has(id string) bool {
	if k == nil {
		return false
	}
	_, ok := k.keys[id]
	return ok
}

// String names the keys and the primary one, never their material.
func (k *Keyring) String() string {
	return fmt.Sprintf("keyring[%s primary=%s]", strings.Join(k.ids, ","), k.primary)
}

// GoString is String, so that %#v does not print the keys either.
func (k *Keyring) GoString() string { return k.String() }
