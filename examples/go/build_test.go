package main

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// go build in examples/go names the binary after the module path's last
// element: inferscale-service (not "go", which shadows the toolchain in the
// directory and reads as "go" in ps), and git ignores it.
func TestBuildNamesTheBinary(t *testing.T) {
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	if name := path.Base(strings.TrimSpace(string(out))); name != "inferscale-service" {
		t.Fatalf("go build writes a binary named %q, want inferscale-service", name)
	}
	ignore, err := os.ReadFile(filepath.Join("..", "..", ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Split(string(ignore), "\n"), "/examples/go/inferscale-service") {
		t.Fatal(".gitignore does not name /examples/go/inferscale-service")
	}
}
