package sundial_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// redisAddr is the address of the private redis-server the examples and
// tests of this package use, started by TestMain.
var redisAddr string

func TestMain(m *testing.M) {
	s, stop, err := queuetest.StartMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sundial tests:", err)
		os.Exit(1)
	}
	redisAddr = s.Addr()
	code := m.Run()
	stop()
	os.Exit(code)
}
