package worker

import (
	"errors"
	"fmt"

	"github.com/sundialhq/sundial/pkg/envelope"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// Encryption is how a worker treats jobs whose payload was encrypted by
// the client (package envelope): it decrypts the payload with Keyring
// before the handler runs — the handler, JobFrom and AfterAttempt see the
// plaintext — and encrypts the attempt's result and error text under the
// keyring's primary key, unless ClearResults or ClearErrors leave them in
// the clear. Jobs with a plain payload are not touched. A durable job's
// step records and a parked attempt's wait stay in the clear.
type Encryption struct {
	// Keyring holds the keys; nil: a job with an encrypted payload goes
	// dead ("payload encrypted with key "k2", which this worker's keyring
	// lacks").
	Keyring *envelope.Keyring
	// ClearResults leaves an encrypted job's result in the clear.
	ClearResults bool
	// ClearErrors leaves an encrypted job's error text in the clear.
	ClearErrors bool
}

// open decrypts j's payload in place when it is encrypted, and tells
// whether it was. Its error, a key the keyring lacks or a payload that
// does not decrypt (tampered with), ends the job dead: retrying would not
// help.
func (e Encryption) open(j *job.Job) (bool, error) {
	if !envelope.IsEncrypted(j.Payload) {
		return false, nil
	}
	pt, err := e.Keyring.Open(envelope.Payload, j.Payload)
	var mk *envelope.MissingKeyError
	switch {
	case errors.As(err, &mk):
		return true, fmt.Errorf("payload encrypted with key %q, which this worker's keyring lacks", mk.KeyID)
	case err != nil:
		return true, err
	}
	j.Payload = pt
	return true, nil
}

// seal encrypts o's result and error text. A result that cannot be
// sealed (no random numbers) fails the attempt rather than store it in
// the clear.
func (e Encryption) seal(o *queue.Outcome) {
	if len(o.Result) > 0 && !e.ClearResults {
		ct, err := e.Keyring.Seal(envelope.Result, o.Result)
		if err != nil {
			o.Kind, o.Result, o.Error = queue.OutcomeFailed, nil, "encrypting the result: "+err.Error()
			return
		}
		o.Result = ct
	}
	// A parked attempt's error says what it waits for ("signal:<name>"),
	// which the engine reads.
	if o.Error != "" && !e.ClearErrors && o.Kind != queue.OutcomeParked {
		ct, err := e.Keyring.SealText(envelope.Error, o.Error)
		if err != nil {
			o.Error = "encrypting the error text: " + err.Error()
			return
		}
		o.Error = ct
	}
}
