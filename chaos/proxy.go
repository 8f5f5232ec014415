package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Network faults go through github.com/Shopify/toxiproxy/v2 embedded as a
// library: each node gets a toxiproxy.Proxy on a loopback port and the
// clients dial the proxy. No toxiproxy HTTP API server is started; toxics
// are added to the proxy's ToxicCollection directly.

// proxyServer is the toxiproxy server value that proxies hang off (it
// carries their logger and metrics); its HTTP API is never listened on.
var proxyServer = sync.OnceValue(func() *toxiproxy.ApiServer {
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
})

// Proxy is a TCP proxy in front of one node, through which latency and
// partitions are injected. It is safe for concurrent use.
type Proxy struct {
	mu sync.Mutex
	p  *toxiproxy.Proxy
}

// NewProxy starts a proxy on a free loopback port that forwards to
// upstream.
func NewProxy(name, upstream string) (*Proxy, error) {
	p := toxiproxy.NewProxy(proxyServer(), name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("chaos: proxy for %s: %w", upstream, err)
	}
	return &Proxy{p: p}, nil
}

// Addr returns the proxy's listening address, which clients dial.
func (p *Proxy) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.p.Listen
}

// SetLatency delays every reply by d (plus up to jitter): a slow node or
// a slow link. It replaces any latency set before; d <= 0 removes it.
func (p *Proxy) SetLatency(d, jitter time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.removeLocked("latency")
	if d <= 0 {
		return nil
	}
	return p.addLocked("latency", "latency", "downstream",
		fmt.Sprintf(`{"latency":%d,"jitter":%d}`, d.Milliseconds(), jitter.Milliseconds()))
}

// Partition drops every byte in both directions, on open connections and
// new ones alike, until Heal: requests never arrive and replies never
// return, as when the network between clients and node is cut. TCP
// connections stay open, so clients see timeouts, not refusals.
func (p *Proxy) Partition() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.p.Toxics.GetToxic("cut_up") != nil {
		return nil
	}
	if err := p.addLocked("cut_up", "timeout", "upstream", `{"timeout":0}`); err != nil {
		return err
	}
	return p.addLocked("cut_down", "timeout", "downstream", `{"timeout":0}`)
}

// Heal removes every toxic: no latency, no partition.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.p.Toxics.ResetToxics(context.Background())
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.p.Stop()
}

func (p *Proxy) addLocked(name, typ, stream, attrs string) error {
	js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, typ, stream, attrs)
	if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		return fmt.Errorf("chaos: toxic %s on %s: %w", name, p.p.Upstream, err)
	}
	return nil
}

func (p *Proxy) removeLocked(name string) {
	if p.p.Toxics.GetToxic(name) != nil {
		_ = p.p.Toxics.RemoveToxic(context.Background(), name)
	}
}
