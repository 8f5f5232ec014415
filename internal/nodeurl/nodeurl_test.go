package nodeurl

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"redis://a:1":               "redis://a:1",
		"redis://u:pw@a:1/0":        "redis://u:xxxxx@a:1/0",
		"rediss://:pw@a:1":          "rediss://:xxxxx@a:1",
		"redis://u:p@w@a:1\x7f":     "redis://u:xxxxx@a:1\x7f",
		"redis://user-only@a:1\x7f": "redis://user-only@a:1\x7f",
		"not a url at all\x7f":      "not a url at all\x7f",
		"redis+sentinel://s:1?master_name=m&password=mpw&sentinel_password=spw": "redis+sentinel://s:1?master_name=m&password=xxxxx&sentinel_password=xxxxx",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q): want %q, got %q", in, want, got)
		}
	}
}

// The fail-fast settings fill what a URL leaves unset, and only that.
func TestNewClientFailFast(t *testing.T) {
	for _, raw := range []string{"redis://h:1", "redis+cluster://h:1", "redis+sentinel://h:1?master_name=m"} {
		s, err := Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.NewClient(nil)
		if err != nil {
			t.Fatal(err)
		}
		var dial, read, write time.Duration
		var dialer, retries int
		switch o := c.(type) {
		case *redis.Client:
			oo := o.Options()
			dial, read, write, dialer, retries = oo.DialTimeout, oo.ReadTimeout, oo.WriteTimeout, oo.DialerRetries, oo.MaxRetries
		case *redis.ClusterClient:
			oo := o.Options()
			dial, read, write, dialer, retries = oo.DialTimeout, oo.ReadTimeout, oo.WriteTimeout, oo.DialerRetries, oo.MaxRetries
		}
		_ = c.Close()
		// go-redis stores "no retries" (-1) of a server as 0 once it
		// has applied its defaults.
		if dial != DialTimeout || read != IOTimeout || write != IOTimeout || dialer != DialerRetries || retries > 0 {
			t.Errorf("%s: want dial/read/write %v/%v/%v, %d dial attempt, no retries; got %v/%v/%v, %d, %d", raw, DialTimeout, IOTimeout, IOTimeout, DialerRetries,
				dial, read, write, dialer, retries)
		}
	}
	s, err := Parse("redis://h:1?dial_timeout=3s&max_retries=2")
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.NewClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if o := c.(*redis.Client).Options(); o.DialTimeout != 3*time.Second || o.MaxRetries != 2 {
		t.Errorf("want the URL's dial_timeout 3s and max_retries 2, got %v, %d", o.DialTimeout, o.MaxRetries)
	}
}

// An adjustment sees the URL's settings and changes the client's; what
// UniversalOptions lacks (a unix socket's Network) stays the URL's.
func TestNewClientAdjust(t *testing.T) {
	s, err := Parse("unix:///tmp/r.sock?db=2")
	if err != nil {
		t.Fatal(err)
	}
	var seen redis.UniversalOptions
	c, err := s.NewClient(func(o *redis.UniversalOptions) {
		seen = *o
		o.PoolSize = 7
		o.Password = "from-a-secret"
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if seen.DB != 2 || seen.DialTimeout != DialTimeout || len(seen.Addrs) != 1 || seen.Addrs[0] != "/tmp/r.sock" {
		t.Errorf("want the URL's settings with the defaults, got db %d, dial %v, addrs %v", seen.DB, seen.DialTimeout, seen.Addrs)
	}
	o := c.(*redis.Client).Options()
	if o.Network != "unix" || o.Addr != "/tmp/r.sock" || o.DB != 2 || o.PoolSize != 7 || o.Password != "from-a-secret" {
		t.Errorf("want unix /tmp/r.sock db 2 pool 7 with the password, got %s %s db %d pool %d", o.Network, o.Addr, o.DB, o.PoolSize)
	}

	s, err = Parse("redis+sentinel://s1:26379?master_name=m")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.NewClient(func(o *redis.UniversalOptions) { o.PoolSize = -1 })
	if err == nil || !strings.Contains(err.Error(), "pool_size=-1") {
		t.Errorf("want a negative pool size refused, got %v", err)
	}
}
