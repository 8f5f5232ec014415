package node

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed543a70bd/redlock/internal/redisnode"
	"github.com/seed543a70bd/redlock/internal/redistest"
)

// TestCountWait: Wait returns at once at zero, when the count falls to
// zero, or after its bound, whichever comes first; the count can be
// waited for again after it rose from zero.
func TestCountWait(t *testing.T) {
	var c Count
	within := func(what string, d time.Duration, f func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { f(); close(done) }()
		select {
		case <-done:
		case <-time.After(d):
			t.Fatalf("%s: want it to return within %v", what, d)
		}
	}
	within("Wait at zero", 5*time.Second, func() { c.Wait(time.Hour) })
	c.Add(2)
	start := time.Now()
	c.Wait(20 * time.Millisecond)
	if since := time.Since(start); since < 20*time.Millisecond {
		t.Fatalf("want Wait to last its bound while the count is 2, returned after %v", since)
	}
	waited := make(chan struct{})
	go func() { c.Wait(time.Hour); close(waited) }()
	c.Done()
	select {
	case <-waited:
		t.Fatal("want Wait to go on while the count is 1")
	case <-time.After(10 * time.Millisecond):
	}
	c.Done()
	within("Wait after the last Done", 5*time.Second, func() { <-waited })
	c.Add(1)
	go c.Done()
	within("Wait after the count rose again", 5*time.Second, func() { c.Wait(time.Hour) })
}

// TestServerVersion: Valkey is told from Redis by server_name, and its
// version is valkey_version, not the redis_version it also reports.
func TestServerVersion(t *testing.T) {
	for _, tc := range []struct {
		info, name, version string
	}{
		{"# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n", "redis", "7.0.15"},
		{"# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\n", "valkey", "8.0.1"},
		{"# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\n", "valkey", "7.2.4"},
		{"", "", ""},
	} {
		name, version := ServerVersion(tc.info)
		if name != tc.name || version != tc.version {
			t.Errorf("ServerVersion(%q): want %q %q, got %q %q", tc.info, tc.name, tc.version, name, version)
		}
	}
}

// TestServerVersionOnServer: the server REDLOCK_SERVER chooses
// (redis-server by default; make test runs this package against
// valkey-server too) is named by ServerVersion as its binary says.
func TestServerVersionOnServer(t *testing.T) {
	bin, err := redisnode.LookPath()
	if err != nil {
		t.Fatal(err)
	}
	info, err := redistest.Client(t, redistest.Nodes(t, 1)[0]).Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	name, version := ServerVersion(info)
	if want := strings.TrimSuffix(filepath.Base(bin), "-server"); name != want || version == "" {
		t.Errorf("ServerVersion of %s's INFO server: want %q and a version, got %q %q", bin, want, name, version)
	}
}
