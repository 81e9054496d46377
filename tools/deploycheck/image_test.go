package deploycheck

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerui"
	"github.com/opencontainers/go-digest"
)

// repo is the repository root, seen from this module.
const repo = "../.."

// image is what the Dockerfile's final stage gives every container.
type image struct {
	base     string            // FROM of the final stage
	user     string            // USER
	env      map[string]string // ENV
	cmd      []string          // CMD
	binaries map[string]string // path in the image → Go package it is built from
}

// loadImage reads the Dockerfile the way BuildKit does and collects what the
// deploy files rely on: the binaries and where they land, the user, the
// environment and the default command.
func loadImage(t *testing.T) *image {
	t.Helper()
	dt, err := os.ReadFile(filepath.Join(repo, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	ast, err := parser.Parse(bytes.NewReader(dt))
	if err != nil {
		t.Fatal(err)
	}
	stages, _, err := instructions.Parse(ast.AST, nil)
	if err != nil {
		t.Fatal(err)
	}
	final := stages[len(stages)-1]
	img := &image{base: final.BaseName, env: map[string]string{}, binaries: map[string]string{}}

	// The go build line: -o <dir>/ then package paths.
	built := map[string][]string{} // stage name → output dir, packages
	for _, st := range stages {
		for _, c := range st.Commands {
			run, ok := c.(*instructions.RunCommand)
			if !ok {
				continue
			}
			words := strings.Fields(strings.Join(run.CmdLine, " "))
			i := slices.Index(words, "build")
			if i < 1 || words[i-1] != "go" {
				continue
			}
			var out string
			var pkgs []string
			for j := i + 1; j < len(words); j++ {
				switch {
				case words[j] == "-o" && j+1 < len(words):
					out = words[j+1]
					j++
				case strings.HasPrefix(words[j], "./"):
					pkgs = append(pkgs, words[j])
				}
			}
			if out == "" || !strings.HasSuffix(out, "/") {
				t.Fatalf("stage %s: go build must write into a directory (-o dir/): %v", st.Name, words)
			}
			built[st.Name] = append([]string{out}, pkgs...)
		}
	}
	for _, c := range final.Commands {
		switch c := c.(type) {
		case *instructions.UserCommand:
			img.user = c.User
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				img.env[kv.Key] = kv.Value
			}
		case *instructions.CmdCommand:
			img.cmd = c.CmdLine
		case *instructions.CopyCommand:
			b, ok := built[c.From]
			if !ok || len(c.SourcePaths) != 1 || c.SourcePaths[0] != b[0] {
				continue
			}
			for _, pkg := range b[1:] {
				img.binaries[path.Join(c.DestPath, path.Base(pkg))] = pkg
			}
		}
	}
	return img
}

func TestDockerfileBuildsEveryBinary(t *testing.T) {
	img := loadImage(t)
	var want []string
	for _, dir := range []string{"services", "cmd"} {
		entries, err := os.ReadDir(filepath.Join(repo, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			// Load tools stay out of the image.
			if e.IsDir() && !strings.HasSuffix(e.Name(), "-bench") {
				want = append(want, "./"+dir+"/"+e.Name())
			}
		}
	}
	var got []string
	for _, pkg := range img.binaries {
		got = append(got, pkg)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the image's binaries come from %v; want every service and command: %v", got, want)
	}
	for bin, pkg := range img.binaries {
		src, err := os.ReadFile(filepath.Join(repo, pkg, "main.go"))
		if err != nil || !bytes.Contains(src, []byte("\npackage main\n")) {
			t.Errorf("%s: %s has no package main in main.go (%v)", bin, pkg, err)
		}
	}
}

func TestDockerfileFinalStage(t *testing.T) {
	img := loadImage(t)
	if !strings.HasPrefix(img.base, "gcr.io/distroless/static") && img.base != "scratch" {
		t.Errorf("final stage FROM %s: want distroless/static or scratch (static binaries, nothing else)", img.base)
	}
	if img.user == "" || img.user == "root" || strings.HasPrefix(img.user, "0") {
		t.Errorf("final stage USER %q: want a non-root numeric user (Kubernetes runAsNonRoot needs a number)", img.user)
	}
	if len(img.cmd) != 1 || img.binaries[img.cmd[0]] == "" {
		t.Errorf("CMD %v: want one binary of the image", img.cmd)
	}
	dt, _ := os.ReadFile(filepath.Join(repo, "Dockerfile"))
	if !bytes.Contains(dt, []byte("CGO_ENABLED=0")) {
		t.Error("the Go build must set CGO_ENABLED=0: the final image has no C library")
	}
}

// offlineImages answers BuildKit's base-image lookups during the lint
// without a registry: a Linux image with the usual PATH and nothing else,
// which is all the lint rules read.
type offlineImages struct{}

func (offlineImages) ResolveImageConfig(_ context.Context, ref string, _ sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	cfg := []byte(`{"architecture":"amd64","os":"linux","rootfs":{"type":"layers"},` +
		`"config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}}`)
	return ref, digest.FromBytes(cfg), cfg, nil
}

// lintDockerfile runs BuildKit's Dockerfile checks, the ones
// `docker build --check` runs, and returns one line per finding.
func lintDockerfile(t *testing.T, dt []byte) []string {
	t.Helper()
	sm := llb.NewSourceMap(nil, "Dockerfile", "Dockerfile", dt)
	sm.Definition = &llb.Definition{}
	res, err := dockerfile2llb.DockerfileLint(context.Background(), dt, dockerfile2llb.ConvertOpt{
		Config:       dockerui.Config{},
		SourceMap:    sm,
		MetaResolver: offlineImages{},
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	if res.Error != nil {
		out = append(out, "error: "+res.Error.Message)
	}
	for _, w := range res.Warnings {
		line := 0
		if len(w.Location.Ranges) > 0 {
			line = int(w.Location.Ranges[0].Start.Line)
		}
		out = append(out, fmt.Sprintf("Dockerfile:%d: %s: %s", line, w.RuleName, w.Detail))
	}
	return out
}

func TestDockerfileLint(t *testing.T) {
	dt, err := os.ReadFile(filepath.Join(repo, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range lintDockerfile(t, dt) {
		t.Error(f)
	}
}

// TestDockerfileLintFinds keeps the lint honest: a Dockerfile with known
// mistakes must be reported.
func TestDockerfileLintFinds(t *testing.T) {
	bad := []byte("FROM golang:1.26 as Build\nENV SECRET_TOKEN abc\nWORKDIR src\nCMD go run .\n")
	got := strings.Join(lintDockerfile(t, bad), "\n")
	for _, rule := range []string{"FromAsCasing", "StageNameCasing", "LegacyKeyValueFormat", "SecretsUsedInArgOrEnv", "WorkdirRelativePath", "JSONArgsRecommended"} {
		if !strings.Contains(got, rule) {
			t.Errorf("lint missed %s; it reported:\n%s", rule, got)
		}
	}
}
