package deploycheck

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// TestBuildContext copies the repository as Docker would send it (through
// .dockerignore, with the same matcher) and checks that every COPY source
// is there and that the Go packages the Dockerfile builds resolve, embedded
// files included, from that copy alone. It compiles nothing (go list).
func TestBuildContext(t *testing.T) {
	f, err := os.Open(filepath.Join(repo, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	patterns, err := ignorefile.ReadAll(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.TempDir()
	var sent int64
	err = filepath.WalkDir(repo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repo, p)
		if rel == "." {
			return nil
		}
		ignored, err := pm.MatchesOrParentMatches(rel)
		if err != nil {
			return err
		}
		switch {
		case ignored && d.IsDir() && !pm.Exclusions():
			return filepath.SkipDir
		case ignored, d.Type()&fs.ModeSymlink != 0:
			return nil
		case d.IsDir():
			return os.MkdirAll(filepath.Join(ctx, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sent += int64(len(b))
		return os.WriteFile(filepath.Join(ctx, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("build context: %.1f MB after .dockerignore", float64(sent)/1e6)

	// Every COPY from the context must find its sources.
	dt, _ := os.ReadFile(filepath.Join(repo, "Dockerfile"))
	ast, err := parser.Parse(bytes.NewReader(dt))
	if err != nil {
		t.Fatal(err)
	}
	stages, _, err := instructions.Parse(ast.AST, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range stages {
		for _, c := range st.Commands {
			cp, ok := c.(*instructions.CopyCommand)
			if !ok || cp.From != "" {
				continue
			}
			for _, src := range cp.SourcePaths {
				if _, err := os.Stat(filepath.Join(ctx, src)); err != nil {
					t.Errorf("stage %s: COPY %s: not in the build context (.dockerignore?)", st.Name, src)
				}
			}
		}
	}

	// The node stage writes the dashboard here before the Go build.
	app := filepath.Join(ctx, "web/dist/app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(app, "index.html"), []byte("<!doctype html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := loadImage(t)
	args := []string{"list", "-deps", "-e", "-f", "{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}"}
	for _, pkg := range img.binaries {
		args = append(args, pkg)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = ctx
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("the Go packages do not resolve from the build context: %v\n%s", err, out)
	}
}
