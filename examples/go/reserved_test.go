package main

import (
	"fmt"
	"math/rand"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	inferscale "github.com/inferscale/inferscale/bindings/go"
)

// Over the {user} routes nobody can write where the engine keeps the shared
// prompt (names under inferscale.ReservedPrefix), and strings with a NUL
// (in the path or the JSON body) are refused instead of being cut, which
// would file Mallory's fact under Alice.
func TestReservedUsersAndNULs(t *testing.T) {
	base, stop := startService(t, filepath.Join(t.TempDir(), "memory.infs"), nil)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	c := &client{t: t, base: base, http: &http.Client{Timeout: 30 * time.Second}}
	rng := rand.New(rand.NewSource(2))
	fact := func(text, metadata string) map[string]any {
		return map[string]any{"text": text, "metadata": metadata, "tokens": []int32{1, 2},
			"embedding": emb(1), "k": kv(rng, 2), "v": kv(rng, 2)}
	}
	var got struct{ ID uint64 }
	if s := c.do("POST", "/v1/users/alice/facts", fact("Alice's PIN is 4321.", ""), &got); s != http.StatusCreated {
		t.Fatalf("adding alice's fact: status %d", s)
	}

	cases := []struct {
		method, path string
		body         any
		says         string
	}{
		{"POST", "/v1/users/inferscale.segments/facts", fact("poison", `{"segment":"header"}`), "reserved"},
		{"POST", "/v1/users/inferscale.other/facts", fact("x", ""), "reserved"},
		{"DELETE", "/v1/users/inferscale.segments/facts/1", nil, "reserved"},
		{"POST", "/v1/users/alice%00mallory/facts", fact("Mallory likes chess.", ""), "user holds a NUL"},
		{"POST", "/v1/users/alice/facts", fact("ab\x00cd", ""), "text holds a NUL"},
		{"POST", "/v1/users/alice/facts", fact("x", "{\"a\":\"\x00\"}"), "metadata holds a NUL"},
		{"GET", "/v1/users/alice%00mallory/facts", nil, "user holds a NUL"},
		{"GET", fmt.Sprintf("/v1/users/alice%%00mallory/facts/%d", got.ID), nil, "user holds a NUL"},
		{"DELETE", fmt.Sprintf("/v1/users/alice%%00/facts/%d", got.ID), nil, "user holds a NUL"},
		{"POST", "/v1/users/alice%00/retrieve", map[string]any{"embedding": emb(1), "k": 1}, "user holds a NUL"},
		{"POST", "/v1/users/alice/retrieve", map[string]any{"embedding": emb(1), "k": 1, "metric": "ip\x00"}, "metric holds a NUL"},
	}
	for _, tc := range cases {
		var e errorJSON
		if s := c.do(tc.method, tc.path, tc.body, &e); s != http.StatusBadRequest || e.Code != int(inferscale.ErrInvalid) ||
			!strings.Contains(e.Error, tc.says) {
			t.Errorf("%s %s: status %d, error %+v; want 400 saying %q", tc.method, tc.path, s, e, tc.says)
		}
	}

	// Nothing was written: Alice has her one fact, no other user exists (the
	// engine's segments are the service's own).
	var list struct{ IDs []uint64 }
	if c.do("GET", "/v1/users/alice/facts", nil, &list); len(list.IDs) != 1 || list.IDs[0] != got.ID {
		t.Fatalf("alice's facts = %v", list.IDs)
	}
	var stats struct {
		Facts uint64
		Users []string
	}
	if c.do("GET", "/v1/stats", nil, &stats); stats.Facts != 1 || strings.Join(stats.Users, ",") != "alice,"+inferscale.SegmentNamespace {
		t.Fatalf("stats = %+v", stats)
	}
}
