package sundial

import (
	"fmt"
	"os"

	"github.com/sundialhq/sundial/pkg/envelope"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/worker"
)

// Keyring holds the named 32-byte keys of client-side encryption: the
// primary key encrypts, every key decrypts what was sealed under its id
// (docs/payloads.md, "Encryption"). It never prints its keys.
type Keyring = envelope.Keyring

// Encryption is how a Runner treats jobs whose payload was encrypted:
// their payload is decrypted before the handler sees it, their result and
// error text encrypted (RunnerConfig.Encryption).
type Encryption = worker.Encryption

// ParseKeyring reads a keyring written as comma- or newline-separated
// "id:base64" entries (32-byte keys). The primary key is primary, or the
// last entry when primary is empty.
func ParseKeyring(s, primary string) (*Keyring, error) { return envelope.Parse(s, primary) }

// KeyringFromEnv reads the keyring from SUNDIAL_KEYRING or
// SUNDIAL_KEYRING_FILE, its primary key from SUNDIAL_KEYRING_PRIMARY; nil
// and no error when neither is set.
func KeyringFromEnv() (*Keyring, error) { return envelope.FromEnv(os.Getenv) }

// WithEncryption makes the Client encrypt the payload of every job it
// submits (Submit, SubmitMany, typed jobs, batches, workflows), after its
// submit middleware, under kr's primary key, and lets Decrypt read
// encrypted jobs. The API, Redis, the history and the dashboard then see
// only ciphertext and the key id; a Runner with the key
// (RunnerConfig.Encryption) hands handlers the plaintext. A job without a
// payload stays without one.
func WithEncryption(kr *Keyring) ClientOption { return func(c *Client) { c.keyring = kr } }

// seal replaces s's payload by its encrypted form when the Client
// encrypts.
func (c *Client) seal(s *job.Spec) error {
	if c.keyring == nil || len(s.Payload) == 0 || envelope.IsEncrypted(s.Payload) {
		return nil
	}
	ct, err := c.keyring.Seal(envelope.Payload, s.Payload)
	if err != nil {
		return fmt.Errorf("sundial: encrypting the payload: %w", err)
	}
	s.Payload = ct
	return nil
}

// Decrypt decrypts, in place, what of rec was encrypted (its payload,
// result and last error) with the Client's keyring (WithEncryption). A key
// the keyring lacks is an error naming the key id; rec is then unchanged.
func (c *Client) Decrypt(rec *Record) error {
	p, r, e := rec.Payload, rec.Result, rec.LastError
	var err error
	if envelope.IsEncrypted(p) {
		if p, err = c.keyring.Open(envelope.Payload, p); err != nil {
			return err
		}
	}
	if envelope.IsEncrypted(r) {
		if r, err = c.keyring.Open(envelope.Result, r); err != nil {
			return err
		}
	}
	if e, err = c.keyring.OpenText(envelope.Error, e); err != nil {
		return err
	}
	rec.Payload, rec.Result, rec.LastError = p, r, e
	return nil
}
