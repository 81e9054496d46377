package sundial_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial"
	"github.com/sundialhq/sundial/pkg/envelope"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

type secretArgs struct {
	SSN string `json:"ssn"`
}

func (secretArgs) Kind() string { return "secret.check" }

func testKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

func keyring(t *testing.T, s string) *sundial.Keyring {
	t.Helper()
	kr, err := sundial.ParseKeyring(s, "")
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// runEncrypted runs a Runner with enc over queue q until the test ends;
// its handler of secret.check returns the payload's ssn, or fails with it
// when it starts with "fail".
func runEncrypted(t *testing.T, rdb *redis.Client, q string, enc sundial.Encryption, seen chan<- string) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	r := sundial.NewRunner(rdb, sundial.RunnerConfig{Queues: []string{q}, ExternalPoller: true, Encryption: enc})
	sundial.Handle(r, func(ctx context.Context, a secretArgs) (any, error) {
		seen <- string(sundial.JobFrom(ctx).Payload)
		if strings.HasPrefix(a.SSN, "fail") {
			return nil, sundial.NoRetry(errors.New("rejected " + a.SSN))
		}
		return map[string]string{"echo": a.SSN}, nil
	})
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// keysHolding returns the keys of the Redis whose name, DUMP or content
// (read by type: DUMP may compress) holds marker.
func keysHolding(t *testing.T, rdb *redis.Client, marker string) []string {
	t.Helper()
	ctx := context.Background()
	var found []string
	n := 0
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		n++
		k := iter.Val()
		dump, _ := rdb.Dump(ctx, k).Result()
		var content any
		switch typ, _ := rdb.Type(ctx, k).Result(); typ {
		case "string":
			content, _ = rdb.Get(ctx, k).Result()
		case "hash":
			content, _ = rdb.HGetAll(ctx, k).Result()
		case "list":
			content, _ = rdb.LRange(ctx, k, 0, -1).Result()
		case "set":
			content, _ = rdb.SMembers(ctx, k).Result()
		case "zset":
			content, _ = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "stream":
			content, _ = rdb.XRange(ctx, k, "-", "+").Result()
		}
		if strings.Contains(k+dump+fmt.Sprint(content), marker) {
			found = append(found, k)
		}
	}
	if err := iter.Err(); err != nil || n == 0 {
		t.Fatalf("scan: %d keys, %v", n, err)
	}
	return found
}

func TestEncryption(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k1, k2 := testKey(t), testKey(t)
	_, rdb := newClient(t)
	old := sundial.NewClient(rdb, sundial.WithEncryption(keyring(t, "k1:"+k1)))
	rotated := sundial.NewClient(rdb, sundial.WithEncryption(keyring(t, "k1:"+k1+",k2:"+k2)))
	q := queuetest.Name("enc")
	seen := make(chan string, 10)
	runEncrypted(t, rdb, q, sundial.Encryption{Keyring: keyring(t, "k1:"+k1+",k2:"+k2)}, seen)
	marker := "MARKER-" + queuetest.Name("m")

	t.Run("RoundTripAcrossRotation", func(t *testing.T) {
		// Submitted under k1 by a client not yet rotated; the worker's ring
		// has k2 as its primary and still reads k1.
		sub, err := old.SubmitMany(ctx, []sundial.Job{{Queue: q, Payload: secretArgs{SSN: marker}}})
		if err != nil {
			t.Fatal(err)
		}
		stored := sub[0].Job
		if kid, ok := envelope.KeyID(stored.Payload); !ok || kid != "k1" || strings.Contains(string(stored.Payload), marker) {
			t.Fatalf("stored payload %s", stored.Payload)
		}
		if got := <-seen; got != `{"ssn":"`+marker+`"}` {
			t.Fatalf("the handler's JobFrom saw %s", got)
		}
		j, err := rotated.Wait(ctx, stored.ID)
		if err != nil {
			t.Fatal(err)
		}
		if kid, ok := envelope.KeyID(j.Result); j.State != sundial.Succeeded || !ok || kid != "k2" {
			t.Fatalf("job %s, result %s", j.State, j.Result)
		}
		// The old client lacks k2, which sealed the result.
		cp := *j
		var mk *envelope.MissingKeyError
		if err := old.Decrypt(&cp); !errors.As(err, &mk) || mk.KeyID != "k2" || mk.What != "result" {
			t.Fatalf("old client's Decrypt: %v", err)
		}
		if err := rotated.Decrypt(j); err != nil {
			t.Fatal(err)
		}
		if string(j.Payload) != `{"ssn":"`+marker+`"}` || string(j.Result) != `{"echo":"`+marker+`"}` {
			t.Fatalf("decrypted payload %s, result %s", j.Payload, j.Result)
		}
	})

	t.Run("ErrorTextEncrypted", func(t *testing.T) {
		sub, err := rotated.Submit(ctx, sundial.Job{Queue: q, Payload: secretArgs{SSN: "fail " + marker}, MaxAttempts: 3})
		if err != nil {
			t.Fatal(err)
		}
		<-seen
		j, err := rotated.Wait(ctx, sub.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if kid, ok := envelope.TextKeyID(j.LastError); j.State != sundial.Dead || !ok || kid != "k2" || strings.Contains(j.LastError, marker) {
			t.Fatalf("job %s, last error %q", j.State, j.LastError)
		}
		if err := rotated.Decrypt(j); err != nil || j.LastError != "rejected fail "+marker {
			t.Fatalf("decrypted last error %q, %v", j.LastError, err)
		}
	})

	t.Run("MissingKeyIsDead", func(t *testing.T) {
		k3 := sundial.NewClient(rdb, sundial.WithEncryption(keyring(t, "k3:"+testKey(t))))
		sub, err := k3.Submit(ctx, sundial.Job{Queue: q, Payload: secretArgs{SSN: marker}, MaxAttempts: 5})
		if err != nil {
			t.Fatal(err)
		}
		j, err := k3.Wait(ctx, sub.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := `payload encrypted with key "k3", which this worker's keyring lacks`
		if j.State != sundial.Dead || j.Attempt != 1 || j.LastError != want {
			t.Fatalf("job %s after %d attempts: %q, want dead at once with %q", j.State, j.Attempt, j.LastError, want)
		}
	})

	t.Run("TamperedIsDead", func(t *testing.T) {
		v, err := keyring(t, "k1:"+k1).Seal(envelope.Payload, []byte(`{"ssn":"`+marker+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		var x map[string]map[string]any
		if err := json.Unmarshal(v, &x); err != nil {
			t.Fatal(err)
		}
		ct, _ := base64.StdEncoding.DecodeString(x[envelope.Field]["ct"].(string))
		ct[0] ^= 0x80
		x[envelope.Field]["ct"] = base64.StdEncoding.EncodeToString(ct)
		bad, _ := json.Marshal(x)
		plain, _ := newClient(t)
		sub, err := plain.Submit(ctx, sundial.Job{Type: "secret.check", Queue: q, Payload: json.RawMessage(bad), MaxAttempts: 5})
		if err != nil {
			t.Fatal(err)
		}
		j, err := plain.Wait(ctx, sub.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != sundial.Dead || j.Attempt != 1 || !strings.Contains(j.LastError, `payload encrypted with key "k1" does not decrypt`) {
			t.Fatalf("job %s after %d attempts: %q", j.State, j.Attempt, j.LastError)
		}
	})

	t.Run("WorkerWithoutKeyring", func(t *testing.T) {
		q2 := queuetest.Name("enc-none")
		runEncrypted(t, rdb, q2, sundial.Encryption{}, make(chan string, 1))
		sub, err := rotated.Submit(ctx, sundial.Job{Queue: q2, Payload: secretArgs{SSN: marker}, MaxAttempts: 5})
		if err != nil {
			t.Fatal(err)
		}
		j, err := rotated.Wait(ctx, sub.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != sundial.Dead || j.Attempt != 1 || j.LastError != `payload encrypted with key "k2", which this worker's keyring lacks` {
			t.Fatalf("job %s after %d attempts: %q", j.State, j.Attempt, j.LastError)
		}
	})

	t.Run("NothingInRedis", func(t *testing.T) {
		if keys := keysHolding(t, rdb, marker); len(keys) > 0 {
			t.Fatalf("keys holding the plaintext marker: %v", keys)
		}
		// The check sees a marker that is there: a job submitted in the clear.
		plain, _ := newClient(t)
		control := "CONTROL-" + queuetest.Name("m")
		if _, err := plain.Submit(ctx, sundial.Job{Type: "secret.check", Queue: queuetest.Name("enc-plain"), Payload: secretArgs{SSN: control}}); err != nil {
			t.Fatal(err)
		}
		if keys := keysHolding(t, rdb, control); len(keys) == 0 {
			t.Fatal("the check did not find the marker of a plain job")
		}
	})
}
