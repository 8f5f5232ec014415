package main

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/seed543a70bd/redlock/cmd/redlock/internal/nodeurl"
)

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
