package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	inferscale "github.com/inferscale/inferscale/bindings/go"
)

// With MEMORY_SERVICE_MAIN=1 the test binary is the service itself (main
// with the command line's arguments), so that a test can signal it.
func TestMain(m *testing.M) {
	if os.Getenv("MEMORY_SERVICE_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// SIGTERM while a request is in flight: the service stops accepting, the
// request finishes and is answered, the process exits 0 and the store holds
// every fact it acknowledged.
func TestSIGTERMFinishesInFlight(t *testing.T) {
	storePath := filepath.Join(t.TempDir(), "memory.infs")
	cmd := exec.Command(os.Args[0], "-store", storePath, "-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "MEMORY_SERVICE_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 100)
	go func() {
		for sc := bufio.NewScanner(stderr); sc.Scan(); {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var logged []string
	// await returns the first log line holding want.
	await := func(want string) string {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the service ended before logging %q:\n%s", want, strings.Join(logged, "\n"))
				}
				logged = append(logged, l)
				if strings.Contains(l, want) {
					return l
				}
			case <-time.After(2 * time.Minute):
				t.Fatalf("no %q logged:\n%s", want, strings.Join(logged, "\n"))
			}
		}
	}
	l := await("msg=listening")
	addr := strings.Fields(l[strings.Index(l, "addr=")+len("addr="):])[0]

	c := &client{t: t, base: "http://" + addr, http: &http.Client{Timeout: time.Minute}}
	var added struct{ IDs []uint64 }
	if s := c.do("POST", "/facts", map[string]any{"namespace": "maya", "facts": []string{"Maya has a cat named Biscuit."}},
		&added); s != http.StatusCreated {
		t.Fatalf("POST /facts: status %d", s)
	}

	// A request whose handler is running (it has asked for the body: 100
	// Continue) when the signal comes; its body is sent once the service
	// is shutting down.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"namespace": "maya", "facts": ["Maya plays the cello."]}`
	fmt.Fprintf(conn, "POST /facts HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n", addr, len(body))
	rd := bufio.NewReader(conn)
	if l, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(l, "HTTP/1.1 100 Continue") {
		t.Fatalf("read %q, %v; want 100 Continue", l, err)
	}
	if l, err := rd.ReadString('\n'); err != nil || l != "\r\n" {
		t.Fatalf("read %q, %v after 100 Continue", l, err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	await(`msg="shutting down"`)
	io.WriteString(conn, body)
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatal(err)
	}
	var late struct{ IDs []uint64 }
	err = json.NewDecoder(resp.Body).Decode(&late)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || err != nil || len(late.IDs) != 1 {
		t.Fatalf("the request in flight got %d, ids %v (%v)", resp.StatusCode, late.IDs, err)
	}

	await("msg=stopped")
	for l := range lines { // to the end of the output, before Wait closes the pipe
		logged = append(logged, l)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the service exited with %v:\n%s", err, strings.Join(logged, "\n"))
	}
	s, err := inferscale.Open(storePath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids, err := s.List("maya")
	if err != nil || len(ids) != 2 || ids[0] != added.IDs[0] || ids[1] != late.IDs[0] {
		t.Fatalf("maya's facts after the restart: %v (%v), want %v and %v", ids, err, added.IDs, late.IDs)
	}
}
