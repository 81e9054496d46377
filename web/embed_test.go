package web

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestDistIsTheDashboard: the FS a plain go build embeds (no npm step
// before it) is the built app: index.html loads its script and stylesheet,
// both embedded, served as a file server would.
func TestDistIsTheDashboard(t *testing.T) {
	app := Dist()
	if app == nil {
		t.Fatal("Dist() is nil: web/dist/app is not in the module; run make web and commit web/dist")
	}
	srv := httptest.NewServer(http.FileServer(http.FS(app)))
	defer srv.Close()
	get := func(p string) string {
		t.Helper()
		res, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", p, res.Status)
		}
		return string(b)
	}
	index := get("/")
	if !strings.Contains(index, `<div id="root"></div>`) || strings.Contains(index, "/src/main.tsx") {
		t.Fatalf("index.html is not the built dashboard:\n%s", index)
	}
	for _, re := range []string{`<script type="module" crossorigin src="(/assets/index-[\w-]+\.js)">`, `<link rel="stylesheet" crossorigin href="(/assets/index-[\w-]+\.css)">`} {
		m := regexp.MustCompile(re).FindStringSubmatch(index)
		if m == nil {
			t.Fatalf("index.html has no %s:\n%s", re, index)
		}
		if body := get(m[1]); len(body) < 1000 {
			t.Errorf("%s: %d bytes", m[1], len(body))
		}
	}
}

// sourceFiles is the set scripts/sources.mjs lists (keep the two the same):
// the files the build is made from, relative to web/, in byte order.
func sourceFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	top, err := filepath.Glob("*")
	if err != nil {
		t.Fatal(err)
	}
	topName := regexp.MustCompile(`^(index\.html|package\.json|package-lock\.json|vite\.config\.ts|tsconfig.*\.json)$`)
	for _, f := range top {
		if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() && topName.MatchString(f) {
			files = append(files, f)
		}
	}
	test := regexp.MustCompile(`\.test\.tsx?$`)
	for _, dir := range []string{"public", "src"} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			p = filepath.ToSlash(p)
			if dir == "src" && (test.MatchString(p) || strings.HasPrefix(p, "src/test/")) {
				return nil
			}
			files = append(files, p)
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	sort.Strings(files)
	return files
}

// TestBuildIsCurrent: the committed build was made from the sources as they
// are. Each source's SHA-256 must be the one dist/sources.sha256 (written by
// npm run build) records, and no source may be missing from it or added.
func TestBuildIsCurrent(t *testing.T) {
	if _, err := os.Stat("src"); err != nil {
		t.Skip("no web/src here (a module download): nothing to compare the build with")
	}
	recorded, err := fs.ReadFile(dist, "dist/sources.sha256")
	if err != nil {
		t.Fatal("web/dist/sources.sha256 is not embedded: run make web (or npm run build in web/) and commit web/dist")
	}
	want := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(string(recorded), "\n"), "\n") {
		sum, file, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("web/dist/sources.sha256: bad line %q", line)
		}
		want[file] = sum
	}
	var stale []string
	for _, f := range sourceFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(b)
		switch sum, ok := want[f]; {
		case !ok:
			stale = append(stale, "added since the build: "+f)
		case sum != hex.EncodeToString(h[:]):
			stale = append(stale, "changed since the build: "+f)
		}
		delete(want, f)
	}
	for f := range want {
		stale = append(stale, "removed since the build: "+f)
	}
	if len(stale) > 0 {
		sort.Strings(stale)
		t.Fatalf("web/dist/app was not built from the sources as they are:\n  %s\nrun make web (or npm run build in web/) and commit web/dist", strings.Join(stale, "\n  "))
	}
}
