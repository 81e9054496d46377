package mongotest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/sundialhq/sundial/internal/mongotest"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// The shared server: a document goes in and comes back, and the server is FerretDB.
func TestClientRoundTrip(t *testing.T) {
	client, db := mongotest.Client(t)
	if _, err := db.Collection("jobs").InsertOne(ctx(t), bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	var got struct {
		N int `bson:"n"`
	}
	if err := db.Collection("jobs").FindOne(ctx(t), bson.D{{Key: "_id", Value: "a"}}).Decode(&got); err != nil || got.N != 1 {
		t.Fatalf("FindOne = %+v, %v", got, err)
	}

	var info bson.M
	if err := client.Database("admin").RunCommand(ctx(t), bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		t.Fatal(err)
	}
	if v, ok := info["ferretdbVersion"].(string); !ok || !strings.HasPrefix(v, "v1.") {
		t.Errorf("buildInfo.ferretdbVersion = %v, want v1.x", info["ferretdbVersion"])
	}
}

// Each test has its own database: what another test wrote is not visible.
func TestDatabasesAreSeparate(t *testing.T) {
	t.Parallel()
	uri, name := mongotest.Start(t)
	if !strings.HasPrefix(uri, "mongodb://127.0.0.1:") {
		t.Errorf("uri = %q", uri)
	}
	_, db := mongotest.Client(t)
	if db.Name() == name {
		t.Errorf("two calls gave the same database name %q", name)
	}
	n, err := db.Collection("jobs").CountDocuments(ctx(t), bson.D{})
	if err != nil || n != 0 {
		t.Fatalf("CountDocuments = %d, %v; want 0 in a fresh database", n, err)
	}
}

// A server of the test's own goes down and comes back with its data.
func TestServerStopStart(t *testing.T) {
	s := mongotest.NewServer(t)
	client, db := s.Client(t)
	coll := db.Collection("history")
	if _, err := coll.InsertOne(ctx(t), bson.D{{Key: "_id", Value: "r1"}, {Key: "state", Value: "done"}}); err != nil {
		t.Fatal(err)
	}

	s.Stop()
	pctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := client.Ping(pctx, readpref.Primary()); err == nil {
		t.Fatal("Ping succeeded while the server was stopped")
	}

	s.Start()
	var got bson.M
	if err := coll.FindOne(ctx(t), bson.D{{Key: "_id", Value: "r1"}}).Decode(&got); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if got["state"] != "done" {
		t.Fatalf("after restart: %v", got)
	}

	// A crash (SIGKILL) loses nothing that was acknowledged either.
	s.Kill()
	s.Start()
	if err := coll.FindOne(ctx(t), bson.D{{Key: "_id", Value: "r1"}}).Err(); err != nil {
		t.Fatalf("after kill and restart: %v", err)
	}
	if _, err := coll.InsertOne(ctx(t), bson.D{{Key: "_id", Value: "r2"}}); err != nil {
		t.Fatalf("insert after restart: %v", err)
	}
}

// Database names are valid for FerretDB even for odd test names.
func TestDBName(t *testing.T) {
	for _, name := range []string{"plain", "with space/and-dash", strings.Repeat("x", 100)} {
		t.Run(name, func(t *testing.T) {
			n := mongotest.DBName(t)
			if len(n) > 63 || strings.Trim(n, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
				t.Errorf("DBName = %q", n)
			}
		})
	}
}
