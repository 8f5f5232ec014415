package redlock_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redisnode"
	"github.com/seed543a70bd/redlock/internal/redistest"
	"github.com/stretchr/testify/require"
)

// Security: nodes behind TLS (with client certificates) and ACL users,
// random tokens, and scripts that touch nothing but the lock's own keys.

// testPKI is a throwaway CA with a server certificate for 127.0.0.1 and a
// client certificate, written as PEM files for redis-server.
type testPKI struct {
	caFile, certFile, keyFile string // for redis-server
	roots                     *x509.CertPool
	client                    tls.Certificate
}

func newPKI(t testing.TB) *testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redlock throwaway test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)

	issue := func(serial int64, cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		require.NoError(t, err)
		pk, err := x509.MarshalPKCS8PrivateKey(key)
		require.NoError(t, err)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk})
	}
	p := &testPKI{
		caFile:   filepath.Join(dir, "ca.crt"),
		certFile: filepath.Join(dir, "server.crt"),
		keyFile:  filepath.Join(dir, "server.key"),
		roots:    x509.NewCertPool(),
	}
	p.roots.AddCert(ca)
	require.NoError(t, os.WriteFile(p.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600))
	srvCert, srvKey := issue(2, "redis-server", x509.ExtKeyUsageServerAuth)
	require.NoError(t, os.WriteFile(p.certFile, srvCert, 0o600))
	require.NoError(t, os.WriteFile(p.keyFile, srvKey, 0o600))
	cliCert, cliKey := issue(3, "redlock-client", x509.ExtKeyUsageClientAuth)
	p.client, err = tls.X509KeyPair(cliCert, cliKey)
	require.NoError(t, err)
	return p
}

// freeLoopbackPort returns a TCP port that was free a moment ago.
func freeLoopbackPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startTLSNode starts a redis-server that also listens with TLS, requiring
// client certificates, and returns it with its TLS address. The plain port
// stays open only for the harness's readiness probe; the library is
// connected through the TLS port.
func startTLSNode(t testing.TB, p *testPKI) (*redisnode.Node, string) {
	t.Helper()
	var lastErr error
	for range 3 { // the TLS port may be taken between freeLoopbackPort and bind
		tlsPort := freeLoopbackPort(t)
		nd, err := redisnode.Start(redisnode.Options{Args: []string{
			"--tls-port", strconv.Itoa(tlsPort),
			"--tls-cert-file", p.certFile,
			"--tls-key-file", p.keyFile,
			"--tls-ca-cert-file", p.caFile,
			"--tls-auth-clients", "yes",
		}})
		if err != nil {
			lastErr = err
			continue
		}
		t.Cleanup(func() { _ = nd.Close() })
		return nd, net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort))
	}
	t.Fatalf("starting a TLS redis-server (is it built with TLS?): %v", lastErr)
	return nil, ""
}

// urlClient returns a client for a redis:// or rediss:// URL with the
// harness's fail-fast settings; tune may adjust the options (TLS config).
func urlClient(t testing.TB, url string, tune func(*redis.Options)) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(url)
	require.NoError(t, err)
	opt.DialTimeout = time.Second
	opt.ReadTimeout = time.Second
	opt.WriteTimeout = time.Second
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	if tune != nil {
		tune(opt)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// requireAllFailed checks that err is an unreachable-quorum acquisition
// error in which every node that answered failed with an error whose text
// contains one of wants (matched case-insensitively), and enough failed to
// rule out a quorum. The round returns as soon as a quorum is impossible,
// so the remaining nodes may still be pending.
func requireAllFailed(t testing.TB, err error, wants ...string) *redlock.QuorumError {
	t.Helper()
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, redlock.ErrUnreachable)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	failed := 0
	for _, n := range qe.Nodes {
		if n.Status == "pending" {
			continue
		}
		if n.Status != "failed" || n.Err == nil {
			t.Fatalf("node %d: want failed with an error, got %v", n.Node, n)
		}
		failed++
		msg := strings.ToLower(n.Err.Error())
		found := len(wants) == 0
		for _, w := range wants {
			found = found || strings.Contains(msg, strings.ToLower(w))
		}
		if !found {
			t.Fatalf("node %d: want an error mentioning one of %q, got %v", n.Node, wants, n.Err)
		}
	}
	if failed <= len(qe.Nodes)-qe.Quorum {
		t.Fatalf("want more than %d of %d nodes failed, got %d: %v", len(qe.Nodes)-qe.Quorum, len(qe.Nodes), failed, err)
	}
	return qe
}

// lockCycle takes key, checks the token on every node, extends and
// releases it, and checks the key is gone. A round returns once a quorum
// answered; the last node may answer a moment later, so the per-node
// checks wait for it.
func lockCycle(t testing.TB, rl *redlock.Client, nodes []redis.UniversalClient, k string, opts ...redlock.LockOption) {
	t.Helper()
	ctx := context.Background()
	l, err := rl.TryLock(ctx, k, 10*time.Second, opts...)
	require.NoError(t, err)
	for i, c := range nodes {
		eventually(t, 5*time.Second, func() bool { return get(t, c, k) == l.Token() },
			"node %d: want %q holding our token", i, k)
	}
	require.NoError(t, l.Extend(ctx, 10*time.Second))
	require.NoError(t, l.Unlock(ctx))
	for i, c := range nodes {
		eventually(t, 5*time.Second, func() bool { return get(t, c, k) == "" },
			"node %d: want %q deleted after Unlock", i, k)
	}
}

func TestTLS(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	addrs := make([]string, 3)
	for i := range addrs {
		_, addrs[i] = startTLSNode(t, p)
	}
	clients := func(tune func(*redis.Options)) []redis.UniversalClient {
		out := make([]redis.UniversalClient, len(addrs))
		for i, a := range addrs {
			out[i] = urlClient(t, "rediss://"+a, tune)
		}
		return out
	}
	// TLS handshakes under the race detector on a busy machine can take
	// longer than the default per-node timeout of a short lease.
	opts := []redlock.Option{redlock.WithNodeTimeout(2 * time.Second)}

	t.Run("mutual TLS", func(t *testing.T) {
		nodes := clients(func(o *redis.Options) {
			o.TLSConfig.RootCAs = p.roots
			o.TLSConfig.Certificates = []tls.Certificate{p.client}
		})
		lockCycle(t, newClient(t, nodes, opts...), nodes, key(t))
	})

	t.Run("server not trusted", func(t *testing.T) {
		other := newPKI(t) // a CA that did not sign the servers' certificates
		nodes := clients(func(o *redis.Options) {
			o.TLSConfig.RootCAs = other.roots
			o.TLSConfig.Certificates = []tls.Certificate{p.client}
		})
		_, err := newClient(t, nodes, opts...).TryLock(context.Background(), key(t), 10*time.Second)
		qe := requireAllFailed(t, err, "certificate")
		var ua x509.UnknownAuthorityError
		if !errors.As(qe.Nodes[0].Err, &ua) {
			t.Logf("node error does not unwrap to x509.UnknownAuthorityError (go-redis flattens it): %v", qe.Nodes[0].Err)
		}
	})

	t.Run("no client certificate", func(t *testing.T) {
		nodes := clients(func(o *redis.Options) { o.TLSConfig.RootCAs = p.roots })
		_, err := newClient(t, nodes, opts...).TryLock(context.Background(), key(t), 10*time.Second)
		requireAllFailed(t, err, "certificate", "tls", "reset", "eof", "broken pipe")
	})

	t.Run("plaintext to the TLS port", func(t *testing.T) {
		nodes := make([]redis.UniversalClient, len(addrs))
		for i, a := range addrs {
			nodes[i] = urlClient(t, "redis://"+a, func(o *redis.Options) {
				o.ReadTimeout = 300 * time.Millisecond
			})
		}
		_, err := newClient(t, nodes, redlock.WithNodeTimeout(time.Second)).TryLock(context.Background(), key(t), 10*time.Second)
		requireAllFailed(t, err)
	})
}

// aclSetUser runs ACL SETUSER name rules... on every node as the default user.
func aclSetUser(t testing.TB, admins []redis.UniversalClient, name string, rules ...string) {
	t.Helper()
	args := []any{"ACL", "SETUSER", name, "reset"}
	for _, r := range rules {
		args = append(args, r)
	}
	for i, c := range admins {
		if err := c.Do(context.Background(), args...).Err(); err != nil {
			t.Fatalf("node %d: ACL SETUSER %s %q: %v", i, name, rules, err)
		}
	}
}

// userClients returns clients for every node logged in as user:pass.
func userClients(t testing.TB, nodes []*redisnode.Node, user, pass string) []redis.UniversalClient {
	t.Helper()
	out := make([]redis.UniversalClient, len(nodes))
	for i, nd := range nodes {
		out[i] = urlClient(t, "redis://"+user+":"+pass+"@"+nd.Addr(), nil)
	}
	return out
}

func TestACL(t *testing.T) {
	t.Parallel()
	nodes := redistest.NodesWith(t, 3, redisnode.Options{Args: []string{"--requirepass", "admin-pw"}})
	admins := redistest.Clients(t, nodes)
	// The documented ACL (docs/security.md): keys and channels of the
	// lock namespace only, no dangerous commands (so no INFO either).
	aclSetUser(t, admins, "locker", "on", ">secret", "~lock:*", "&redlock:*", "+@all", "-@dangerous")
	// The least a plain lock needs: the two scripting commands, and the
	// commands the scripts run.
	aclSetUser(t, admins, "minimal", "on", ">secret", "~lock:*", "-@all",
		"+evalsha", "+eval", "+get", "+set", "+pexpire", "+del")
	// Every feature: the ACL docs/security.md recommends.
	aclSetUser(t, admins, "full", append([]string{"on", ">secret"}, documentedACL...)...)
	ctx := context.Background()

	t.Run("documented user, every feature", func(t *testing.T) {
		cs := userClients(t, nodes, "full", "secret")
		// The guard refuses nodes younger than d; these started moments ago.
		rl := newClient(t, cs, redlock.WithFencing(), redlock.WithRestartGuard(time.Millisecond))
		k := "lock:" + key(t)
		var a *redlock.Lock
		eventually(t, 5*time.Second, func() bool {
			var err error
			a, err = rl.TryLock(ctx, k, 10*time.Second)
			return err == nil
		}, "want the lock once the nodes are older than the restart guard")
		require.NoError(t, a.Extend(ctx, 10*time.Second))
		// A waiter subscribes to the release channel (hand-off) ...
		got := make(chan error, 1)
		go func() {
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			b, err := rl.Lock(lctx, k, 10*time.Second)
			if err == nil {
				if b.Fence() <= a.Fence() {
					err = fmt.Errorf("want a fence above %d, got %d", a.Fence(), b.Fence())
				}
				err = errors.Join(err, b.Unlock(ctx))
			}
			got <- err
		}()
		eventually(t, 5*time.Second, func() bool { return subscribed(t, admins, 1) }, "want the waiter's pattern subscription on every node")
		// ... and is woken by the release.
		require.NoError(t, a.Unlock(ctx))
		require.NoError(t, <-got)
	})

	t.Run("restricted user locks", func(t *testing.T) {
		cs := userClients(t, nodes, "locker", "secret")
		lockCycle(t, newClient(t, cs), redistest.Clients(t, nodes), "lock:"+key(t))
	})

	t.Run("minimal user locks", func(t *testing.T) {
		cs := userClients(t, nodes, "minimal", "secret")
		lockCycle(t, newClient(t, cs), redistest.Clients(t, nodes), "lock:"+key(t))
	})

	t.Run("restricted user with fencing", func(t *testing.T) {
		cs := userClients(t, nodes, "locker", "secret")
		rl := newClient(t, cs, redlock.WithFencing())
		k := "lock:" + key(t)
		var last int64
		for i := range 3 {
			// Lock, not TryLock: the previous Unlock's last node may not
			// have answered yet.
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			l, err := rl.Lock(lctx, k, 10*time.Second)
			cancel()
			require.NoError(t, err)
			f := l.Fence()
			require.NoError(t, l.Unlock(ctx))
			require.Positive(t, f, "lock %d: want a fencing token", i)
			if f <= last {
				t.Fatalf("lock %d: want a fence above %d, got %d", i, last, f)
			}
			last = f
		}
	})

	t.Run("key outside the user's pattern", func(t *testing.T) {
		cs := userClients(t, nodes, "locker", "secret")
		_, err := newClient(t, cs).TryLock(ctx, "other:"+key(t), 10*time.Second)
		requireAllFailed(t, err, "NOPERM")
	})

	t.Run("wrong password", func(t *testing.T) {
		cs := userClients(t, nodes, "locker", "not-the-password")
		_, err := newClient(t, cs).TryLock(ctx, "lock:"+key(t), 10*time.Second)
		requireAllFailed(t, err, "WRONGPASS", "auth")
	})

	t.Run("disabled user", func(t *testing.T) {
		aclSetUser(t, admins, "retired", "off", ">secret", "~lock:*", "+@all")
		cs := userClients(t, nodes, "retired", "secret")
		_, err := newClient(t, cs).TryLock(ctx, "lock:"+key(t), 10*time.Second)
		requireAllFailed(t, err, "WRONGPASS", "auth", "disabled")
	})
}

// documentedACL is the ACL docs/security.md recommends for a lock user:
// the lock keys (with their fence counters) and release channels, the
// scripting commands and what the scripts run, INFO for the restart guard
// and duplicate detection, and the pattern subscription of the hand-off.
var documentedACL = []string{
	"resetkeys", "~lock:*", "resetchannels", "&redlock:release:*",
	"-@all", "+evalsha", "+eval", "+get", "+set", "+pexpire", "+del", "+publish",
	"+info", "+psubscribe", "+punsubscribe", "+ping",
	"+zadd", "+zpopmin", "+zrank", "+zrange", "+zrem", "+exists",
}

var tokenRE = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestTokens checks that each lock gets its own 128-bit random token,
// hex-encoded, and that it is what the nodes store.
func TestTokens(t *testing.T) {
	_, cs := cluster(t, 3)
	rl := newClient(t, cs)
	ctx := context.Background()
	const n = 500
	seen := make(map[string]bool, n)
	var digits [16]int
	for i := range n {
		// A fresh key each time: the last node of the previous Unlock may
		// not have answered yet.
		k := key(t)
		l, err := rl.TryLock(ctx, k, 10*time.Second)
		require.NoError(t, err)
		tok := l.Token()
		if !tokenRE.MatchString(tok) {
			t.Fatalf("lock %d: want 32 lower-case hex digits, got %q", i, tok)
		}
		if seen[tok] {
			t.Fatalf("lock %d: token %q issued twice", i, tok)
		}
		seen[tok] = true
		for _, c := range tok {
			digits[strings.IndexRune("0123456789abcdef", c)]++
		}
		if i%100 == 0 {
			for j, c := range cs {
				eventually(t, 5*time.Second, func() bool { return get(t, c, k) == tok },
					"node %d: want token %q stored", j, tok)
			}
		}
		require.NoError(t, l.Unlock(ctx))
	}
	// 16000 uniform hex digits: each digit about 1000 times. A bound of
	// [700, 1300] is over 9 standard deviations wide.
	for d, c := range digits {
		if c < 700 || c > 1300 {
			t.Fatalf("hex digit %x: want about 1000 occurrences in %d tokens, got %d", d, n, c)
		}
	}
}

// globEscape escapes s for a Redis glob pattern (ACL key patterns).
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// TestScriptsTouchOnlyOwnKeys runs every kind of operation as an ACL user
// allowed exactly the lock's key, its fence counter and its channels:
// Redis checks every command a script runs against the caller's key
// patterns, so a script touching any other key would fail with NOPERM.
// Afterwards the nodes hold no other key.
func TestScriptsTouchOnlyOwnKeys(t *testing.T) {
	t.Parallel()
	nodes := redistest.NodesWith(t, 3, redisnode.Options{Args: []string{"--requirepass", "admin-pw"}})
	admins := redistest.Clients(t, nodes)
	k := key(t)
	aclSetUser(t, admins, "onekey", "on", ">secret",
		"~"+globEscape(k), "~"+globEscape(redlock.KeyName("fence", k)),
		"&*"+globEscape(k)+"*", // the release channel, whatever its prefix
		"+@all", "-@dangerous")
	cs := userClients(t, nodes, "onekey", "secret")
	ctx := context.Background()
	for _, fenced := range []bool{false, true} {
		// Generous per-node timeouts: the run must not depend on the load
		// (lockCycle wants the token on every node, which a node cut
		// short by its timeout never holds).
		opts := []redlock.Option{redlock.WithNodeTimeout(5 * time.Second)}
		if fenced {
			opts = append(opts, redlock.WithFencing())
		}
		rl := newClient(t, cs, opts...)
		// Acquire, extend, release.
		lockCycle(t, rl, admins, k)
		// A contended attempt, whose partial win is released.
		holdForeign(t, admins[0], k, 10*time.Second)
		holdForeign(t, admins[1], k, 10*time.Second)
		_, err := rl.TryLock(ctx, k, 10*time.Second)
		require.ErrorIs(t, err, redlock.ErrContended)
		for i, a := range admins[:2] {
			require.NoError(t, a.Del(ctx, k).Err(), "node %d", i)
		}
		waitGone(t, admins, k)
		// Do, with auto-extension.
		require.NoError(t, rl.Do(ctx, k, time.Second, func(ctx context.Context) error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(1200 * time.Millisecond): // outlive the TTL: extensions run
				return nil
			}
		}))
		// Extend and Unlock of a lock that was taken over.
		waitGone(t, admins, k)
		l, err := rl.TryLock(ctx, k, 10*time.Second)
		require.NoError(t, err)
		for i, a := range admins {
			require.NoError(t, a.Set(ctx, k, "someone-else-0123456789", 10*time.Second).Err(), "node %d", i)
		}
		require.ErrorIs(t, l.Extend(ctx, time.Second), redlock.ErrNotHeld)
		require.ErrorIs(t, l.Unlock(ctx), redlock.ErrNotHeld)
		for i, a := range admins {
			require.NoError(t, a.Del(ctx, k).Err(), "node %d", i)
		}
	}
	allowed := map[string]bool{k: true, redlock.KeyName("fence", k): true}
	for i, a := range admins {
		keys, err := a.Keys(ctx, "*").Result()
		require.NoError(t, err)
		for _, got := range keys {
			if !allowed[got] {
				t.Errorf("node %d: want only %q and %q, got key %q", i, k, redlock.KeyName("fence", k), got)
			}
		}
	}
}

const prefix = "app1:"

func TestKeyPrefixInvalid(t *testing.T) {
	_, cs := cluster(t, 1)
	for _, p := range []string{"{app1}:", "app1}", "a{"} {
		_, err := redlock.New(cs, redlock.WithKeyPrefix(p))
		require.ErrorIs(t, err, redlock.ErrInvalid, "prefix %q", p)
	}
	rl := newClient(t, cs, redlock.WithKeyPrefix(prefix))
	l, err := rl.TryLock(context.Background(), key(t), time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(context.Background()))
}

// TestKeyPrefixOnNodes: the nodes hold the prefixed key and fence
// counter; the API names the caller's key.
func TestKeyPrefixOnNodes(t *testing.T) {
	_, cs := cluster(t, 3)
	rl := newClient(t, cs, redlock.WithKeyPrefix(prefix), redlock.WithFencing())
	ctx := context.Background()
	k := key(t)

	l, err := rl.TryLock(ctx, k, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, k, l.Key())
	require.Equal(t, []string{k}, lockKeys(l))
	require.Positive(t, l.Fence())
	for i, c := range cs {
		eventually(t, 5*time.Second, func() bool { return get(t, c, prefix+k) == l.Token() },
			"node %d: want %q holding our token", i, prefix+k)
		eventually(t, 5*time.Second, func() bool {
			return get(t, c, redlock.KeyName("fence", prefix+k)) == strconv.FormatInt(l.Fence(), 10)
		}, "node %d: want the fence counter under %q", i, redlock.KeyName("fence", prefix+k))
		require.Empty(t, get(t, c, k), "node %d: the unprefixed key", i)
		require.Empty(t, get(t, c, redlock.KeyName("fence", k)), "node %d: the unprefixed counter", i)
	}
	require.NoError(t, l.Extend(ctx, 10*time.Second))
	require.NoError(t, l.Unlock(ctx))
	for i, c := range cs {
		eventually(t, 5*time.Second, func() bool { return get(t, c, prefix+k) == "" },
			"node %d: want %q deleted after Unlock", i, prefix+k)
	}

	// A contended attempt names the caller's key, and its clean-up
	// releases the prefixed key it won.
	holdForeign(t, cs[0], prefix+k, 10*time.Second)
	holdForeign(t, cs[1], prefix+k, 10*time.Second)
	_, err = rl.TryLock(ctx, k, 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrContended)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, []string{k}, qe.Keys)
	eventually(t, 5*time.Second, func() bool { return get(t, cs[2], prefix+k) == "" },
		"node 2: want the lost attempt's grant released")

	// Several keys: every one is prefixed.
	ks := []string{key(t), key(t)}
	ml, err := rl.TryLockKeys(ctx, ks, 10*time.Second)
	require.NoError(t, err)
	for i, c := range cs {
		for _, k := range ks {
			eventually(t, 5*time.Second, func() bool { return get(t, c, prefix+k) == ml.Token() },
				"node %d: want %q holding our token", i, prefix+k)
		}
	}
	require.NoError(t, ml.Unlock(ctx))
}

// TestKeyPrefixHandoff: Unlock announces on prefix+ReleaseChannel(key),
// and a waiting Lock of a prefixed client wakes on it.
func TestKeyPrefixHandoff(t *testing.T) {
	_, cs := cluster(t, 3)
	handoff(t, newClient(t, cs, redlock.WithKeyPrefix(prefix)), cs, key(t))
}

// handoff checks, with rl as holder and waiter, that a Lock waiting for k
// wakes on the holder's Unlock long before its retry delay, and that the
// release is announced on prefix+ReleaseChannel(k). admins subscribe.
func handoff(t *testing.T, rl *redlock.Client, admins []redis.UniversalClient, k string) {
	t.Helper()
	ctx := context.Background()
	// A key lock's release is announced on its queue node (and the next).
	qn := redlock.QueueNodeForTest(prefix+k, len(admins))
	sub := admins[qn].(*redis.Client).Subscribe(ctx, prefix+redlock.KeyName("release", k))
	t.Cleanup(func() { _ = sub.Close() })
	_, err := sub.Receive(ctx) // the subscription's confirmation
	require.NoError(t, err)

	a, err := rl.TryLock(ctx, k, 30*time.Second)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		// Only the hand-off can wake it within the test's bounds.
		b, err := rl.Lock(lctx, k, 10*time.Second, redlock.WithRetryDelay(time.Minute))
		if err == nil {
			err = b.Unlock(ctx)
		}
		got <- err
	}()
	eventually(t, 5*time.Second, func() bool { return subscribed(t, admins, 1) }, "want the waiter's pattern subscription on every node")
	require.NoError(t, a.Unlock(ctx))
	awaitNoError(t, got, 10*time.Second, "want the waiter woken by the release")
	msg, err := sub.ReceiveTimeout(ctx, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, prefix+redlock.KeyName("release", k), msg.(*redis.Message).Channel)
}

// TestKeyPrefixACL: a user confined to the prefix (~app1:* &app1:*)
// locks and unlocks; with &app1:redlock:release:*, which a pattern
// subscription needs literally, the hand-off works too.
func TestKeyPrefixACL(t *testing.T) {
	nodes := redistest.NodesWith(t, 3, redisnode.Options{Args: []string{"--requirepass", "admin-pw"}})
	admins := redistest.Clients(t, nodes)
	cmds := []string{"-@all", "+evalsha", "+eval", "+get", "+set", "+pexpire", "+del", "+publish", "+psubscribe", "+punsubscribe", "+ping"}
	aclSetUser(t, admins, "app1", append([]string{"on", ">secret", "~app1:*", "resetchannels", "&app1:*"}, cmds...)...)
	aclSetUser(t, admins, "app1sub", append([]string{"on", ">secret", "~app1:*", "resetchannels", "&app1:redlock:release:*"}, cmds...)...)
	ctx := context.Background()

	t.Run("lock and unlock", func(t *testing.T) {
		cs := userClients(t, nodes, "app1", "secret")
		rl := newClient(t, cs, redlock.WithKeyPrefix(prefix), redlock.WithFencing())
		k := key(t)
		for range 2 {
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			l, err := rl.Lock(lctx, k, 10*time.Second)
			cancel()
			require.NoError(t, err)
			require.NoError(t, l.Extend(ctx, 10*time.Second))
			require.NoError(t, l.Unlock(ctx))
		}
		// The same user without the prefix may not touch the key.
		_, err := newClient(t, cs).TryLock(ctx, k, 10*time.Second)
		requireAllFailed(t, err, "NOPERM")
	})

	t.Run("hand-off", func(t *testing.T) {
		cs := userClients(t, nodes, "app1sub", "secret")
		handoff(t, newClient(t, cs, redlock.WithKeyPrefix(prefix)), admins, key(t))
	})
}

// TestFamilyKeyPrefix: with WithKeyPrefix every key the family writes
// is under the prefix, and hand-off still wakes waiters.
func TestFamilyKeyPrefix(t *testing.T) {
	var refused refusals
	clients, rl := threeNodes(t, redlock.WithKeyPrefix("app1:"), redlock.WithObserver(refused.observe))
	ctx := context.Background()
	root := key(t)
	var held []*redlock.Lock
	for _, op := range familyOps(rl, root) {
		l, err := op(ctx, 0)
		require.NoError(t, err)
		held = append(held, l)
	}
	for _, k := range nodeKeys(t, clients, root) {
		_, name, _ := strings.Cut(k, ": ")
		require.True(t, strings.HasPrefix(name, "app1:"), "want every key under the prefix, got %q", name)
	}
	// A writer waiting on the read lock wakes on the reader's release.
	r := held[0]
	for _, l := range held {
		if strings.HasSuffix(l.Key(), "-r0") {
			r = l
		}
	}
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		w, err := rl.Lock(wctx, r.Key(), time.Second, redlock.WithRetryDelay(5*time.Second))
		if err == nil {
			err = w.Unlock(ctx)
		}
		got <- err
	}()
	refused.awaitWaiting(t, clients, 1)
	start := time.Now()
	for _, l := range held {
		require.NoError(t, l.Unlock(ctx))
	}
	require.NoError(t, <-got)
	require.Less(t, time.Since(start), 2*time.Second, "want the writer woken by the release under the prefix")
	eventually(t, 2*time.Second, func() bool { return len(nodeKeys(t, clients, root)) == 0 },
		"want nothing left on the nodes, got %v", nodeKeys(t, clients, root))
}

// FuzzKeys locks arbitrary keys, alone and in pairs, for arbitrary TTLs,
// on one set of three real nodes shared by all cases. Empty and duplicate
// keys and bad TTLs are ErrInvalid; every other key, however odd its bytes,
// is locked and released on every node, all keys of a lock or none.
func FuzzKeys(f *testing.F) {
	for _, k := range [][2]string{
		{"a", "b"}, {"", "b"}, {"a", ""}, {"same", "same"},
		{"{tag}x", "{tag}y"}, {"{}", "}{"}, {"\x00", "\x00\x00"}, {"\xff\xfe", "ünïcödé ✓"},
		{"with space", "with\r\nnewline"}, {"*", "?"}, {"lock:x", redlock.KeyName("fence", "lock:x")},
		{strings.Repeat("k", 4096), "short"},
	} {
		f.Add(k[0], k[1], int64(10*time.Second))
	}
	f.Add("ttl", "zero", int64(0))
	f.Add("ttl", "negative", int64(-1))
	f.Add("ttl", "tiny", int64(3*time.Millisecond))
	f.Add("ttl", "short", int64(20*time.Millisecond))
	f.Add("ttl", "huge", int64(math.MaxInt64))

	nodes := redistest.Nodes(f, 3)
	clients := redistest.Clients(f, nodes)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, k1, k2 string, ttlNs int64) {
		rl := newClient(t, clients)
		ttl := time.Duration(ttlNs)
		// Valid iff ttl - ceil(ttl/100) - 2ms >= 1ms: 3ms is too short,
		// 3.1ms enough; in between either answer is right.
		ttlBad, ttlGood := ttl < 3*time.Millisecond, ttl >= 3100*time.Microsecond

		l, err := rl.TryLock(ctx, k1, ttl)
		switch {
		case k1 == "" || ttlBad:
			if !errors.Is(err, redlock.ErrInvalid) {
				t.Fatalf("TryLock(%q, %v): want ErrInvalid, got %v", k1, ttl, err)
			}
			if k1 == "" {
				return
			}
		case !ttlGood:
			if err == nil {
				_ = l.Unlock(ctx)
			} else if !errors.Is(err, redlock.ErrInvalid) && !errors.Is(err, redlock.ErrNotObtained) {
				t.Fatalf("TryLock(%q, %v): want ErrInvalid or ErrNotObtained, got %v", k1, ttl, err)
			}
			waitGone(t, clients, k1)
		case ttl < time.Second:
			// Too short to be sure of winning on a busy machine, and may
			// expire any moment: only the error's class is checked.
			if err != nil {
				if !errors.Is(err, redlock.ErrNotObtained) {
					t.Fatalf("TryLock(%q, %v): want ErrNotObtained, got %v", k1, ttl, err)
				}
			} else if err := l.Unlock(ctx); err != nil && !errors.Is(err, redlock.ErrNotHeld) {
				t.Fatalf("Unlock: want nil or ErrNotHeld, got %v", err)
			}
			waitGone(t, clients, k1)
		default:
			if err != nil {
				t.Fatalf("TryLock(%q, %v): want the lock, got %v", k1, ttl, err)
			}
			if got := get(t, clients[0], k1); got != l.Token() && got != "" { // "" : node 0 not yet answered
				t.Fatalf("node 0: want our token at %q, got %q", k1, got)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("Unlock(%q): %v", k1, err)
			}
			waitGone(t, clients, k1)
		}

		// Two keys: all or none. With k1 held by another lock, the pair is
		// contended and k2 must not be taken anywhere.
		keys := []string{k1, k2}
		if k2 == "" || k1 == k2 {
			if _, err := rl.TryLockKeys(ctx, keys, 10*time.Second); !errors.Is(err, redlock.ErrInvalid) {
				t.Fatalf("TryLockKeys(%q): want ErrInvalid, got %v", keys, err)
			}
			return
		}
		held, err := rl.TryLock(ctx, k1, 10*time.Second)
		if err != nil {
			t.Fatalf("TryLock(%q): %v", k1, err)
		}
		if _, err := rl.TryLockKeys(ctx, keys, 10*time.Second); !errors.Is(err, redlock.ErrContended) {
			t.Fatalf("TryLockKeys(%q) with %q held: want ErrContended, got %v", keys, k1, err)
		}
		waitGone(t, clients, k2)
		if err := held.Unlock(ctx); err != nil {
			t.Fatalf("Unlock(%q): %v", k1, err)
		}
		waitGone(t, clients, k1)
		both, err := rl.TryLockKeys(ctx, keys, 10*time.Second)
		if err != nil {
			t.Fatalf("TryLockKeys(%q): want the lock, got %v", keys, err)
		}
		for _, k := range keys {
			eventually(t, 5*time.Second, func() bool { return get(t, clients[0], k) == both.Token() },
				"node 0: want our token at %q", k)
		}
		if err := both.Unlock(ctx); err != nil {
			t.Fatalf("Unlock(%q): %v", keys, err)
		}
		waitGone(t, clients, k1, k2)
	})
}

// waitGone waits until no node holds any of keys: a round returns once a
// quorum answered, and the others answer a moment later.
func waitGone(t testing.TB, clients []redis.UniversalClient, keys ...string) {
	t.Helper()
	for i, c := range clients {
		for _, k := range keys {
			eventually(t, 5*time.Second, func() bool { return get(t, c, k) == "" },
				"node %d: want %q gone", i, k)
		}
	}
}

// electionACL is what docs/security.md adds to documentedACL for
// elections: the elections' keys (KeyName("election", name), with their fence counters
// and histories), what Inspect, Leader and Observe read (TYPE, PTTL,
// ZRANGEBYSCORE, TIME), and what Campaign and Proclaim write to an
// election's history (ZADD, ZREMRANGEBYRANK; PEXPIRE is a lock's).
var electionACL = []string{"~redlock:election:*", "+type", "+pttl", "+zrangebyscore", "+time", "+zadd", "+zremrangebyrank"}

// TestElectionACL pins docs/security.md's ACL for elections: a user
// with exactly those commands campaigns, proclaims, reads the leader,
// observes every publication, inspects and resigns; without one of them
// the call that needs it fails at once with the node's ACL error.
func TestElectionACL(t *testing.T) {
	nodes := redistest.NodesWith(t, 3, redisnode.Options{Args: []string{"--requirepass", "admin-pw"}})
	admins := redistest.Clients(t, nodes)
	rules := append(append([]string{"on", ">secret"}, documentedACL...), electionACL...)
	aclSetUser(t, admins, "elector", rules...)
	ctx := context.Background()

	t.Run("documented commands", func(t *testing.T) {
		rl := newClient(t, userClients(t, nodes, "elector", "secret"))
		name := key(t)
		el := rl.Election(name)
		obs, first := startObserving(t, el, 1)
		lead, err := el.Campaign(ctx, "a", 10*time.Second)
		require.NoError(t, err)
		require.NoError(t, lead.Proclaim(ctx, "b"))
		ld, err := el.Leader(ctx)
		require.NoError(t, err)
		require.Equal(t, "b", ld.Value)
		h, err := rl.Inspect(ctx, redlock.KeyName("election", name))
		require.NoError(t, err)
		require.Equal(t, "held", h.State)
		require.NoError(t, lead.Resign(ctx))
		lead2, err := el.Campaign(ctx, "c", 10*time.Second)
		require.NoError(t, err)
		requireSaw(t, obs, []observed{first, {lead.Lock().Fence(), "a"}, {lead.Lock().Fence(), "b"}, {lead2.Lock().Fence(), "c"}}, 0)
		require.NoError(t, lead2.Resign(ctx))
	})

	for _, tc := range []struct {
		drop string
		call func(el *redlock.Election) error
		want error
	}{
		{"+pttl", func(el *redlock.Election) error { _, err := el.Leader(ctx); return err }, redlock.ErrUnreachable},
		{"+zadd", func(el *redlock.Election) error {
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			_, err := el.Campaign(cctx, "v", 10*time.Second)
			return err
		}, redlock.ErrNotObtained},
	} {
		t.Run("without "+tc.drop, func(t *testing.T) {
			user := "elector" + tc.drop[1:]
			aclSetUser(t, admins, user, slices.DeleteFunc(slices.Clone(rules), func(r string) bool { return r == tc.drop })...)
			rl := newClient(t, userClients(t, nodes, user, "secret"))
			var err error
			within(t, 30*time.Second, "the call without "+tc.drop, func() { err = tc.call(rl.Election(key(t))) })
			require.ErrorIs(t, err, tc.want)
			// A script's denied command: the server names the script, in
			// the words of Redis 7.0 or of Valkey 8.
			require.Regexp(t, "can't run this command|ACL failure in script", err.Error())
		})
	}
}
