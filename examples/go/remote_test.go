package main

import (
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// startRedis starts redis-server (or valkey-server) on a free loopback
// port in a temporary directory, stopped when the test ends; the test is
// skipped when neither is installed.
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if bin, err = exec.LookPath("valkey-server"); err != nil {
			t.Skip("redis-server is not installed (scripts/setup.sh installs it)")
		}
	}
	dir := t.TempDir()
	for attempt := 0; attempt < 5; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "",
			"--appendonly", "yes", "--appendfsync", "always", "--logfile", "server.log")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 200; i++ {
			if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 100*time.Millisecond); err == nil {
				c.SetDeadline(time.Now().Add(time.Second))
				c.Write([]byte("PING\r\n"))
				buf := make([]byte, 8)
				n, _ := c.Read(buf)
				c.Close()
				if strings.HasPrefix(string(buf[:n]), "+PONG") {
					t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
					return fmt.Sprintf("redis://127.0.0.1:%d", port)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		cmd.Process.Kill()
		cmd.Wait()
	}
	t.Fatal("redis-server did not start")
	return ""
}

// Two instances of the service on two store files share one server: the
// facts one of them encodes are listed, read and used in answers by the
// other, which never saw them; then the other way round.
func TestTwoInstancesShareOneServer(t *testing.T) {
	url := startRedis(t)
	dir := t.TempDir()
	baseA, stopA := startService(t, filepath.Join(dir, "a.infs"), nil, "-remote", url)
	baseB, stopB := startService(t, filepath.Join(dir, "b.infs"), nil, "-remote", url)
	httpc := &http.Client{Timeout: 120 * time.Second}
	a := &client{t: t, base: baseA, http: httpc}
	b := &client{t: t, base: baseB, http: httpc}

	var added struct{ IDs []uint64 }
	if s := a.do("POST", "/facts", map[string]any{"namespace": "maya", "facts": []string{
		"Maya has a cat named Biscuit.",
		"Maya works as a nurse in Lisbon.",
		"Maya is learning to play the cello.",
	}}, &added); s != http.StatusCreated || len(added.IDs) != 3 {
		t.Fatalf("POST /facts to A: status %d, ids %v", s, added.IDs)
	}

	var listed struct{ IDs []uint64 }
	if s := b.do("GET", "/v1/users/maya/facts", nil, &listed); s != http.StatusOK {
		t.Fatalf("GET /v1/users/maya/facts from B: status %d", s)
	}
	slices.Sort(listed.IDs)
	if !slices.Equal(listed.IDs, added.IDs) {
		t.Fatalf("B lists maya's facts %v, A added %v", listed.IDs, added.IDs)
	}
	var f factJSON
	if s := b.do("GET", fmt.Sprintf("/v1/users/maya/facts/%d", added.IDs[0]), nil, &f); s != http.StatusOK ||
		f.Text != "Maya has a cat named Biscuit." {
		t.Fatalf("B reads fact %d as %+v (status %d)", added.IDs[0], f, s)
	}
	var ans askResponse
	if s := b.do("POST", "/ask", map[string]any{"namespace": "maya", "question": "What is the name of Maya's cat?",
		"k": 2, "max_tokens": 12}, &ans); s != http.StatusOK {
		t.Fatalf("POST /ask to B: status %d", s)
	}
	t.Logf("B answers %q from facts %v", ans.Answer, ans.FactIDs)
	if len(ans.FactIDs) != 2 || ans.FactIDs[0] != added.IDs[0] || !strings.Contains(ans.Answer, "Biscuit") {
		t.Fatalf("B answers %q from facts %v, want Biscuit from A's fact %d first", ans.Answer, ans.FactIDs,
			added.IDs[0])
	}

	// A user first seen by B is answered by A, and the ids of both
	// instances never collide.
	var more struct{ IDs []uint64 }
	if s := b.do("POST", "/facts", map[string]any{"namespace": "tomas", "facts": []string{
		"Tomas builds furniture from reclaimed oak.",
	}}, &more); s != http.StatusCreated || len(more.IDs) != 1 || slices.Contains(added.IDs, more.IDs[0]) {
		t.Fatalf("POST /facts to B: status %d, ids %v (A's were %v)", s, more.IDs, added.IDs)
	}
	if s := a.do("POST", "/ask", map[string]any{"namespace": "tomas", "question": "What does Tomas build?",
		"k": 1, "max_tokens": 8}, &ans); s != http.StatusOK || len(ans.FactIDs) != 1 || ans.FactIDs[0] != more.IDs[0] {
		t.Fatalf("POST /ask to A about tomas: status %d, facts %v, want %v", s, ans.FactIDs, more.IDs)
	}
	t.Logf("A answers %q about B's user", ans.Answer)

	if err := stopA(); err != nil {
		t.Fatalf("A: %v", err)
	}
	if err := stopB(); err != nil {
		t.Fatalf("B: %v", err)
	}
}
