package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// slowProxy starts toxiproxy, embedded as a library (no HTTP API), on a
// free loopback port in front of upstream, with a latency toxic that
// delays every reply by delay. It returns the proxy's address and a stop
// function.
func slowProxy(upstream string, delay time.Duration) (string, func(), error) {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "slow", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return "", nil, fmt.Errorf("toxiproxy: %w", err)
	}
	toxic := fmt.Sprintf(`{"name":"slow","type":"latency","stream":"downstream","attributes":{"latency":%d}}`, delay.Milliseconds())
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(toxic)); err != nil {
		p.Stop()
		return "", nil, fmt.Errorf("toxiproxy: %w", err)
	}
	return p.Listen, p.Stop, nil
}
