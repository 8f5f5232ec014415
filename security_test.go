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
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redisnode"
	"github.com/seed543a70bd/redlock/internal/redistest"
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
		if n.Status == redlock.NodePending {
			continue
		}
		if n.Status != redlock.NodeFailed || n.Err == nil {
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
func lockCycle(t testing.TB, rl *redlock.Client, nodes []redis.UniversalClient, k string, opts ...redlock.Option) {
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
		for i, c := range admins {
			eventually(t, 5*time.Second, func() bool {
				n, err := c.PubSubNumPat(ctx).Result()
				return err == nil && n > 0
			}, "node %d: want the waiter's pattern subscription", i)
		}
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
	nodes := redistest.NodesWith(t, 3, redisnode.Options{Args: []string{"--requirepass", "admin-pw"}})
	admins := redistest.Clients(t, nodes)
	k := key(t)
	aclSetUser(t, admins, "onekey", "on", ">secret",
		"~"+globEscape(k), "~"+globEscape(redlock.FenceKey(k)),
		"&*"+globEscape(k)+"*", // the release channel, whatever its prefix
		"+@all", "-@dangerous")
	cs := userClients(t, nodes, "onekey", "secret")
	ctx := context.Background()
	for _, fenced := range []bool{false, true} {
		// Generous per-node timeouts: the run must not depend on the load.
		opts := []redlock.Option{redlock.WithNodeTimeout(300 * time.Millisecond)}
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
	allowed := map[string]bool{k: true, redlock.FenceKey(k): true}
	for i, a := range admins {
		keys, err := a.Keys(ctx, "*").Result()
		require.NoError(t, err)
		for _, got := range keys {
			if !allowed[got] {
				t.Errorf("node %d: want only %q and %q, got key %q", i, k, redlock.FenceKey(k), got)
			}
		}
	}
}
