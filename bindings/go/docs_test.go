package inferscale

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// docBlocks returns the fenced code blocks of docs/go.md: info string and
// text (lines without the fences).
func docBlocks(t *testing.T) [][2]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "go.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks [][2]string
	var lang string
	var body []string
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		fence := strings.HasPrefix(strings.TrimSpace(l), "```")
		switch {
		case fence && !in:
			in, lang, body = true, strings.TrimPrefix(strings.TrimSpace(l), "```"), nil
		case fence:
			in = false
			blocks = append(blocks, [2]string{lang, strings.Join(body, "\n") + "\n"})
		case in:
			body = append(body, l)
		}
	}
	return blocks
}

// Every Go block of docs/go.md is either the module's program (built by
// TestDocsModule) or the body of an example of example_docs_test.go, which
// go vet and go test compile; every such example is shown.
func TestDocsExamples(t *testing.T) {
	fset := token.NewFileSet()
	src, err := os.ReadFile("example_docs_test.go")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(fset, "example_docs_test.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	examples := map[string]string{} // body, one tab less, -> name
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || !strings.HasPrefix(fn.Name.Name, "Example") {
			continue
		}
		body := string(src[fset.Position(fn.Body.Lbrace).Offset+2 : fset.Position(fn.Body.Rbrace).Offset])
		lines := strings.Split(body, "\n")
		for i, l := range lines {
			lines[i] = strings.TrimPrefix(l, "\t")
		}
		examples[strings.Join(lines, "\n")] = fn.Name.Name
	}
	shown := map[string]bool{}
	for _, b := range docBlocks(t) {
		if b[0] != "go" || strings.HasPrefix(b[1], "package main\n") {
			continue
		}
		name, ok := examples[b[1]]
		if !ok {
			t.Errorf("docs/go.md shows a Go block that is no example of example_docs_test.go:\n%s", b[1])
		}
		shown[name] = true
	}
	for _, name := range examples {
		if !shown[name] {
			t.Errorf("docs/go.md does not show %s", name)
		}
	}
}

// The steps docs/go.md gives a user: a module of their own, outside the
// repository, with the documented go.mod (require + replace onto a
// checkout) and program, and the documented shell steps run as written
// (vet, build, run) offline against the library pkg-config finds, with Go
// on PATH only through the install steps' PATH line.
func TestDocsModule(t *testing.T) {
	var gomod, program, pathLine, steps string
	for _, b := range docBlocks(t) {
		switch {
		case strings.HasPrefix(b[1], "module "):
			gomod = b[1]
		case b[0] == "go" && strings.HasPrefix(b[1], "package main\n"):
			program = b[1]
		case b[0] == "sh" && strings.Contains(b[1], "meson install") && pathLine == "":
			for _, l := range strings.Split(b[1], "\n") {
				if strings.HasPrefix(l, "export PATH=") {
					pathLine = l
				}
			}
		case b[0] == "sh" && strings.Contains(b[1], "cd /path/to/memapp"):
			steps = b[1]
		}
	}
	const checkout = "/path/to/inferscale"
	if gomod == "" || program == "" || strings.Count(gomod, checkout) != 1 ||
		!strings.Contains(gomod, "\nrequire github.com/inferscale/inferscale/bindings/go v0.0.0\n") {
		t.Fatalf("docs/go.md lacks the go.mod (require, replace => %s/bindings/go) or the program:\n%s", checkout, gomod)
	}
	if pathLine == "" || steps == "" {
		t.Fatalf("docs/go.md's install steps put no Go on PATH (%q) or it shows no steps that build the module "+
			"(a shell block starting cd /path/to/memapp)", pathLine)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, text := range map[string]string{"go.mod": strings.Replace(gomod, checkout, root, 1), "main.go": program} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// PATH without the folders that hold a go command: only the doc's line
	// may bring one.
	var path []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(d, "go")); err != nil {
			path = append(path, d)
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "GOROOT=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+strings.Join(path, string(filepath.ListSeparator)), "GOFLAGS=-mod=mod",
		"GOPROXY=off", "GOWORK=off", "GONOSUMDB=*", "GOSUMDB=off", "GOTOOLCHAIN=local")
	script := pathLine + "\n" + strings.Replace(steps, "/path/to/memapp", dir, 1)
	cmd := exec.Command("bash", "-euc", script)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the steps of docs/go.md:\n%s\nfailed: %v\n%s", script, err, out)
	}
	if !slices.Contains(strings.Fields(string(out)), Version()) {
		t.Fatalf("the program printed %q, want the library's version %s", out, Version())
	}
	if _, err := os.Stat(filepath.Join(dir, "memapp")); err != nil {
		t.Fatalf("go build did not write ./memapp: %v", err)
	}
}
