package inferscale

import (
	"bytes"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startRedis starts redis-server on a free loopback port in a temporary
// directory and stops it when the test ends; the test is skipped when no
// server is installed.
func startRedis(t *testing.T) (*exec.Cmd, string) {
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
					return cmd, fmt.Sprintf("redis://127.0.0.1:%d", port)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		cmd.Process.Kill()
		cmd.Wait()
	}
	t.Fatal("redis-server did not start")
	return nil, ""
}

func TestRemoteSharedAndLostFile(t *testing.T) {
	srv, url := startRedis(t)
	g := testGeometry()
	dir := t.TempDir()
	a, err := Open(filepath.Join(dir, "a.infs"), &Options{Create: true, Geometry: &g, Identity: testIdentity,
		Remote: url, RemoteTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(3))
	f := randomFact(rng, g, 3)
	f.Text = "Maya has a cat named Biscuit."
	id, err := a.Put("maya", f)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	// another file, then the first one lost: the server answers
	for _, name := range []string{"b.infs", "a.infs"} {
		if name == "a.infs" {
			os.Remove(filepath.Join(dir, "a.infs"))
		}
		s, err := Open(filepath.Join(dir, name), &Options{Remote: url})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := s.Prefetch("maya"); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get("maya", id)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Text != f.Text || !bytes.Equal(got.K, f.K) || !bytes.Equal(got.V, f.V) {
			t.Fatalf("%s: another fact came back", name)
		}
		s.Close()
	}
	// the server down: an I/O error naming it, within the timeout
	s, err := Open(filepath.Join(dir, "a.infs"), &Options{Remote: url, RemoteTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv.Process.Kill()
	srv.Wait()
	start := time.Now()
	_, err = s.Put("maya", f)
	wantCode(t, err, ErrIO)
	if !strings.Contains(err.Error(), strings.TrimPrefix(url, "redis://")) || time.Since(start) > 2*time.Second {
		t.Fatalf("server down: %v after %v", err, time.Since(start))
	}
}

func TestRemoteBadOptions(t *testing.T) {
	g := testGeometry()
	path := filepath.Join(t.TempDir(), "a.infs")
	_, err := Open(path, &Options{Create: true, Geometry: &g, Identity: testIdentity, Remote: "http://127.0.0.1:1"})
	wantCode(t, err, ErrInvalid)
	_, err = Open(path, &Options{Create: true, Geometry: &g, Identity: testIdentity, Remote: "127.0.0.1:1",
		RemoteTimeout: -time.Second})
	wantCode(t, err, ErrInvalid)
}
