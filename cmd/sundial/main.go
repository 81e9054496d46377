// Command sundial is the command-line client of Sundial's HTTP API: it
// manages recurring schedules, submits and inspects jobs, shows queues,
// handles dead letters and follows job events live (watch). It prints
// tables for people and, with --json, the API's JSON for scripts. See
// docs/cli.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sundialhq/sundial/internal/buildinfo"
)

func main() {
	if buildinfo.IsVersionFlag(os.Args[1:]) {
		fmt.Println(buildinfo.String("cli"))
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv})
	stop()
	os.Exit(code)
}
