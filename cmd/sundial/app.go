package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Exit codes (docs/cli.md).
const (
	exitOK       = 0 // success
	exitError    = 1 // the API refused or failed the request, or could not be reached
	exitUsage    = 2 // bad command line: unknown command or flag, missing argument, unreadable file
	exitNotFound = 3 // the job, schedule, queue or batch does not exist (404)
)

// env is what a run sees of the outside world, so tests can run the CLI
// in-process.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

// usageError is a mistake on the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// options are the flags every command accepts.
type options struct {
	url, apiKey string
	json        bool
	timeout     time.Duration
}

// app is one run of the CLI.
type app struct {
	env  *env
	opts options
	api  *client
}

// command is a subcommand: its name, a one-line summary and its code.
type command struct {
	name, args, summary string
	run                 func(ctx context.Context, a *app, args []string) error
}

func commands() []command {
	return []command{
		{"schedules", "list|get|put|delete|enable|disable|trigger|info", "manage recurring schedules", runSchedules},
		{"queues", "[QUEUE] | pause|resume|forget QUEUE", "show queues' counts; pause, resume or forget one", runQueues},
		{"jobs", "submit|get|list|search|wait|logs|cancel|retry|signal|bulk", "submit, inspect, wait for, signal and act on jobs", runJobs},
		{"workflows", "submit -f FILE [--id ID]", "submit a DAG of jobs across queues (docs/workflows.md)", runWorkflows},
		{"batches", "submit -f FILE [--id ID] | get|cancel|retry ID", "batches of jobs with callbacks (docs/workflows.md)", runBatches},
		{"workers", "", "the live workers", runWorkers},
		{"dead", "list|retry|purge QUEUE", "dead letters of a queue", runDead},
		{"limits", "list QUEUE | set|delete QUEUE NAME", "concurrency and rate limits of a queue", runLimits},
		{"storage", "", "the storage format Redis holds and the processes that read it", runStorage},
		{"audit", "[--actor ID] [--action A] [--target T] [--since TIME|DURATION] [--until TIME]", "who changed what: the audit log, newest first", runAudit},
		{"watch", "[--queue Q] [--type T] [--job ID] [--stats]", "print job events live, one line each, until Ctrl-C", runWatch},
		{"help", "", "show this help", nil},
	}
}

// run runs the CLI with args (without the program name) and returns the
// exit code.
func run(ctx context.Context, args []string, e *env) int {
	a := &app{env: e}
	err := a.dispatch(ctx, args)
	var ue *usageError
	var ae *apiError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "sundial: %s\nRun 'sundial help' for usage.\n", ue.msg)
		return exitUsage
	case errors.As(err, &ae):
		fmt.Fprintf(e.stderr, "sundial: %s\n", ae.Error())
		if ae.Status == 404 {
			return exitNotFound
		}
		return exitError
	default:
		fmt.Fprintf(e.stderr, "sundial: %v\n", err)
		return exitError
	}
}

func (a *app) dispatch(ctx context.Context, args []string) error {
	if len(args) > 0 && slices.Contains([]string{"-h", "-help", "--help"}, args[0]) {
		a.usage(a.env.stdout) // asked for: to stdout, as "help" does
		return nil
	}
	fs := a.flags("sundial")
	rest, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		a.usage(a.env.stderr)
		return usagef("no command given")
	}
	name, rest := rest[0], rest[1:]
	if name == "help" {
		a.usage(a.env.stdout)
		return nil
	}
	for _, c := range commands() {
		if c.name == name && c.run != nil {
			return c.run(ctx, a, rest)
		}
	}
	return usagef("unknown command %q", name)
}

// flags returns a FlagSet with the common flags bound to a.opts. Every
// subcommand's FlagSet has them too, so they may come anywhere.
func (a *app) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(a.env.stderr)
	if a.opts.url == "" {
		a.opts.url = a.env.getenv("SUNDIAL_URL")
		if a.opts.url == "" {
			a.opts.url = "http://127.0.0.1:8080"
		}
		a.opts.apiKey = a.env.getenv("SUNDIAL_API_KEY")
		a.opts.timeout = 30 * time.Second
	}
	fs.StringVar(&a.opts.url, "url", a.opts.url, "API base `URL` (env SUNDIAL_URL)")
	fs.StringVar(&a.opts.apiKey, "api-key", a.opts.apiKey, "API `key` (env SUNDIAL_API_KEY)")
	fs.Lookup("api-key").DefValue = "" // help never prints the key
	fs.BoolVar(&a.opts.json, "json", a.opts.json, "print the API's JSON instead of tables")
	fs.DurationVar(&a.opts.timeout, "timeout", a.opts.timeout, "give up on a request after this `duration`")
	return fs
}

// parse parses fs from args, allowing flags after positional arguments
// ("get nightly --json") unless stopAtFirst, and returns the positional
// arguments. "--" ends the flags.
func parse(fs *flag.FlagSet, args []string, stopAtFirst bool) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usagef("%v", err)
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if len(rest) == 0 || stopAtFirst || consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// client returns the API client for the parsed options.
func (a *app) client() *client {
	if a.api == nil {
		a.api = &client{base: strings.TrimRight(a.opts.url, "/"), key: a.opts.apiKey, timeout: a.opts.timeout}
	}
	return a.api
}

// usage writes the command list and the common flags to w.
func (a *app) usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: sundial [--url URL] [--api-key KEY] [--json] COMMAND [ARGS]")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %-50s %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprintln(w, "\nFlags (also after the command):")
	fs := a.flags("sundial")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintln(w, "\nRun 'sundial COMMAND -h' for a command's flags. Exit codes: 0 ok, 1 API or server error, 2 usage error, 3 not found.")
}
