// Command sundial-probe is the health check of Sundial's container image,
// which has no shell and no HTTP client: docker-compose runs it against a
// process's /healthz or /readyz. It exits 0 when the URL answers 2xx, 1 with
// the reason on stderr when it does not, and 2 on a bad command line.
//
//	sundial-probe [-timeout 3s] URL
package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/sundialhq/sundial/internal/buildinfo"
	"net/http"
	"os"
	"time"
)

func main() {
	if buildinfo.IsVersionFlag(os.Args[1:]) {
		fmt.Println(buildinfo.String("probe"))
		return
	}
	fs := flag.NewFlagSet("sundial-probe", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	fs.Usage = func() { fmt.Fprintln(fs.Output(), "usage: sundial-probe [-timeout 3s] URL") }
	if err := fs.Parse(os.Args[1:]); err != nil || fs.NArg() != 1 {
		fs.Usage()
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := check(ctx, fs.Arg(0)); err != nil {
		fmt.Fprintf(os.Stderr, "sundial-probe: %v\n", err)
		cancel()
		os.Exit(1)
	}
}

// check GETs url and wants a 2xx answer.
func check(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return nil
}
