package main

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/cmd/redlock/internal/nodeurl"
)

func TestParseNodes(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	t.Run("valid", func(t *testing.T) {
		specs, err := parseNodes(" redis://a:1 ,rediss://alice:s3cret@b:2/3,redis://c,unix:///tmp/r.sock?db=2", env(nil))
		if err != nil {
			t.Fatalf("want no error, got %v", err)
		}
		if len(specs) != 4 {
			t.Fatalf("want 4 nodes, got %d", len(specs))
		}
		if got := specs[0].opts.Addr; got != "a:1" {
			t.Errorf("node 1: want addr a:1, got %s", got)
		}
		o := specs[1].opts
		if o.Addr != "b:2" || o.DB != 3 || o.Username != "alice" || o.Password != "s3cret" || o.TLSConfig == nil {
			t.Errorf("node 2: want b:2 db 3, user alice, password, TLS; got %s db %d user %q password %q TLS %v", o.Addr, o.DB, o.Username, o.Password, o.TLSConfig != nil)
		}
		if strings.Contains(specs[1].url, "s3cret") {
			t.Errorf("node 2: want the password redacted, got %s", specs[1].url)
		}
		if got := specs[2].opts.Addr; got != "c:6379" {
			t.Errorf("node 3: want default port, got %s", got)
		}
		if o := specs[3].opts; o.Network != "unix" || o.Addr != "/tmp/r.sock" || o.DB != 2 {
			t.Errorf("node 4: want unix /tmp/r.sock db 2, got %s %s db %d", o.Network, o.Addr, o.DB)
		}
	})
	t.Run("flag wins over env", func(t *testing.T) {
		specs, err := parseNodes("redis://a:1", env(map[string]string{envNodes: "redis://b:1,redis://c:1"}))
		if err != nil || len(specs) != 1 || specs[0].opts.Addr != "a:1" {
			t.Fatalf("want a:1 from the flag, got %v, %v", specs, err)
		}
	})
	t.Run("env", func(t *testing.T) {
		specs, err := parseNodes("", env(map[string]string{envNodes: "redis://b:1,redis://c:1"}))
		if err != nil || len(specs) != 2 {
			t.Fatalf("want 2 nodes from %s, got %v, %v", envNodes, specs, err)
		}
	})

	bad := []struct {
		name, flag, env string
		want            []string // substrings of the error
	}{
		{"none", "", "", []string{"no nodes", envNodes}},
		{"blank", " ", " ", []string{"no nodes"}},
		{"empty element", "redis://a:1,,redis://b:1", "", []string{"node 2 of 3 is empty"}},
		{"trailing comma", "redis://a:1,", "", []string{"node 2 of 2 is empty"}},
		{"duplicate", "redis://a:1,redis://b:1,redis://a:1", "", []string{`node 3 "redis://a:1" is node 1 "redis://a:1" again`}},
		{"duplicate default port", "redis://a,redis://a:6379", "", []string{`node 2 "redis://a:6379" is node 1 "redis://a" again`}},
		{"same host other db", "redis://a:1/0,redis://a:1/0", "", []string{`is node 1 "redis://a:1/0" again`}},
		{"no scheme", "localhost:6379", "", []string{`"localhost:6379"`, "no scheme"}},
		{"bare ip:port", "127.0.0.1:7381", "", []string{`"127.0.0.1:7381"`, "no scheme: write redis://host:port"}},
		{"cluster bad scheme", "http+cluster://h:1", "", []string{`scheme "http+cluster"`}},
		{"cluster no host", "redis+cluster://", "", []string{"no host"}},
		{"cluster bad addr", "redis+cluster://h:1?addr=nope", "", []string{"addr"}},
		{"cluster twice", "redis+cluster://h:1?addr=h:2,redis+cluster://h:2?addr=h:1", "", []string{`is node 1 "redis+cluster://h:1?addr=h:2" again`}},
		{"sentinel no master", "redis+sentinel://s:26379", "", []string{"master_name"}},
		{"sentinel bad db", "redis+sentinel://s:26379/x?master_name=m", "", []string{"database number"}},
		{"sentinel negative pool", "redis+sentinel://s:26379?master_name=m&pool_size=-1", "", []string{"pool_size=-1"}},
		{"bare host", "redis-1", "", []string{`"redis-1"`, "no scheme"}},
		{"bad scheme", "http://a:1", "", []string{`"http://a:1"`, `scheme "http"`}},
		{"no host", "redis://", "", []string{"no host"}},
		{"bad db", "redis://u:pw@a:1/x", "", []string{`"redis://u:xxxxx@a:1/x"`, "invalid database number"}},
		{"bad url", "redis://a:1\x7f", "", []string{"not a URL"}},
		{"bad query", "redis://a:1?dial_timeout=soon", "", []string{"dial_timeout"}},
		{"negative pool", "redis://a:1?pool_size=-1", "", []string{"pool_size=-1 is negative"}},
		{"bad protocol", "redis://a:1?protocol=9", "", []string{"protocol=9"}},
		{"from env", "", "ftp://x", []string{envNodes, `scheme "ftp"`}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseNodes(tc.flag, env(map[string]string{envNodes: tc.env}))
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("want a usage error, got %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("want error containing %q, got %q", w, err)
				}
			}
			if strings.Contains(err.Error(), "pw@") {
				t.Errorf("want the password redacted, got %q", err)
			}
		})
	}
}

// Cluster and Sentinel nodes: go-redis's ParseClusterURL and
// ParseFailoverURL behind the redis+cluster:// and redis+sentinel://
// schemes (rediss+ for TLS). No server is contacted.
func TestParseClusterAndSentinel(t *testing.T) {
	noEnv := func(string) string { return "" }
	specs, err := parseNodes("redis+cluster://u:pw@c1:7000?addr=c2:7001&addr=c3:7002,"+
		"rediss+sentinel://:spw@s1:26379/2?master_name=mymaster&addr=s2:26379&password=mpw,"+
		"redis://plain:6379", noEnv)
	if err != nil {
		t.Fatalf("want no error, got %v", err)
	}
	if len(specs) != 3 {
		t.Fatalf("want 3 nodes, got %d", len(specs))
	}
	co := specs[0].cluster
	if co == nil || !slices.Equal(co.Addrs, []string{"c1:7000", "c2:7001", "c3:7002"}) || co.Username != "u" || co.Password != "pw" || co.TLSConfig != nil {
		t.Errorf("node 1: want a cluster of c1..c3 with user u, got %+v", co)
	}
	fo := specs[1].failover
	if fo == nil || fo.MasterName != "mymaster" || !slices.Equal(fo.SentinelAddrs, []string{"s1:26379", "s2:26379"}) ||
		fo.SentinelPassword != "spw" || fo.Password != "mpw" || fo.DB != 2 || fo.TLSConfig == nil {
		t.Errorf("node 2: want master mymaster db 2 via s1, s2, TLS, with passwords, got %+v", fo)
	}
	if specs[2].opts == nil || specs[2].opts.Addr != "plain:6379" {
		t.Errorf("node 3: want a plain server, got %+v", specs[2])
	}
	for i, sp := range specs {
		if strings.Contains(sp.url, "pw") && !strings.Contains(sp.url, "xxxxx") || strings.Contains(sp.url, "mpw") || strings.Contains(sp.url, "spw") {
			t.Errorf("node %d: want passwords redacted, got %s", i+1, sp.url)
		}
	}
	clients, err := newClients(specs)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(clients)
	if _, ok := clients[0].(*redis.ClusterClient); !ok {
		t.Errorf("node 1: want a *redis.ClusterClient, got %T", clients[0])
	}
	if _, ok := clients[1].(*redis.Client); !ok {
		t.Errorf("node 2: want a failover *redis.Client, got %T", clients[1])
	}
}

// Fuzz targets for node URL handling. `go test` runs the seeds; `make
// fuzz` fuzzes each for a while.

var nodeURLSeeds = []string{
	"redis://127.0.0.1:6379",
	"redis://127.0.0.1:6379,redis://127.0.0.1:6380,redis://127.0.0.1:6381",
	"rediss://user:pass@127.0.0.1:6380/2?dial_timeout=1s",
	"redis://:secret@h/15,redis://:secret@h/14",
	"unix:///tmp/redis.sock?db=3",
	"redis://[::1]:6379/0",
	"redis://h,redis://h",
	"redis://h:6379,redis://h:6379/0",
	"localhost:6379",
	"http://h",
	"redis://",
	"redis://h/x",
	"redis://%zz",
	"redis://u:p@h:99999",
	",",
	" , redis://h",
	"redis://h?pool_size=-1",
	"redis://h?pool_size=0&min_idle_conns=-1&max_retries=-5",
	"redis://h?protocol=9&read_timeout=-2s",
	"127.0.0.1:7381",
	"redis+cluster://u:pw@h:7000?addr=h:7001&addr=h:7002",
	"rediss+sentinel://:pw@s1:26379/2?master_name=m&addr=s2:26379",
	"redis+sentinel://s1",
	"redis+cluster://h?pool_size=-1",
}

// FuzzParseNodes checks that no --nodes value makes the CLI panic, while
// parsing it or building clients from it; that accepted lists name each
// address and db once; and that the URLs shown never carry a password.
func FuzzParseNodes(f *testing.F) {
	for _, s := range nodeURLSeeds {
		f.Add(s)
	}
	noEnv := func(string) string { return "" }
	f.Fuzz(func(t *testing.T, list string) {
		specs, err := parseNodes(list, noEnv)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, s := range specs {
			id := s.id
			if s.opts != nil { // the address and db, whatever the spec's id says
				id = fmt.Sprintf("%s %s/%d", s.opts.Network, s.opts.Addr, s.opts.DB)
			}
			if seen[id] {
				t.Fatalf("parseNodes(%q): %s given twice was accepted", list, id)
			}
			seen[id] = true
			if u, err := url.Parse(s.url); err == nil && u.User != nil {
				if p, ok := u.User.Password(); ok && p != "xxxxx" {
					t.Fatalf("parseNodes(%q): shown URL %q carries a password", list, s.url)
				}
			}
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("parseNodes(%q) accepted options that make go-redis panic in NewClient: %v", list, r)
				}
			}()
			clients, err := newClients(specs)
			if err != nil {
				t.Fatalf("parseNodes(%q) accepted what NewClients refuses: %v", list, err)
			}
			closeAll(clients)
		}()
	})
}

// safeChars maps s onto letters and digits, so that it can sit in a URL's
// userinfo without changing the URL's structure.
func safeChars(s string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := []byte(s)
	for i, c := range b {
		b[i] = alphabet[int(c)%len(alphabet)]
	}
	return string(b)
}

// FuzzRedact checks that a node URL's password never shows, neither in
// the error for a bad URL nor in the URL shown for a good one, whatever
// follows the userinfo.
func FuzzRedact(f *testing.F) {
	for _, rest := range []string{"127.0.0.1:6379", "h:99999", "h/x", "%zz", "h?pool_size=x", "h@other:1", "h:1,", "[::1", "h#frag", "h:1/0?db=x"} {
		f.Add("user", "s3cr3t-password", rest)
	}
	f.Add("", "pw", "h")
	noEnv := func(string) string { return "" }
	f.Fuzz(func(t *testing.T, user, pass, rest string) {
		user = safeChars(user)
		secret := "Zq" + safeChars(pass) + "9x" // at least 4 chars; unlikely elsewhere
		if strings.Contains(rest, secret) || strings.Contains(user, secret) || strings.Contains(rest, ",") {
			return
		}
		for _, scheme := range []string{"redis", "rediss", "unix", "bad"} {
			raw := scheme + "://" + user + ":" + secret + "@" + rest
			specs, err := parseNodes(raw, noEnv)
			if err != nil {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("parseNodes(%q): error shows the password: %v", raw, err)
				}
				continue
			}
			for _, s := range specs {
				if strings.Contains(s.url, secret) {
					t.Fatalf("parseNodes(%q): shown URL %q shows the password", raw, s.url)
				}
			}
			if got := nodeurl.Redact(raw); strings.Contains(got, secret) {
				t.Fatalf("Redact(%q) = %q shows the password", raw, got)
			}
		}
	})
}
