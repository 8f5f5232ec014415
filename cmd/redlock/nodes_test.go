package main

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
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
