// Package redlockprom exports what a redlock.Client does as Prometheus
// metrics. Its Collector is a prometheus.Collector whose Observe takes
// the library's events: register it, and pass Observe to
// redlock.WithObserver.
//
//	metrics := redlockprom.New()
//	prometheus.MustRegister(metrics)
//	locker, err := redlock.New(clients, redlock.WithObserver(metrics.Observe))
//
// It is its own module, so that importing redlock never downloads
// client_golang.
//
// # Metrics
//
//	redlock_round_duration_seconds          histogram  op, reason   every round, from its first request to the decision
//	redlock_acquire_attempts_total          counter    reason       lock rounds (acquire attempts; Lock makes one per try)
//	redlock_extensions_total                counter                 extend rounds that won
//	redlock_locks_held                      gauge                   locks acquired and not yet released or lost
//	redlock_locks_released_total            counter                 locks ended by Unlock
//	redlock_locks_lost_total                counter                 locks found lost while held
//	redlock_lock_hold_duration_seconds      histogram               how long locks were held, until released or lost
//	redlock_node_request_duration_seconds   histogram  op, node     every node request, from its round's start to the reply
//	redlock_node_errors_total               counter    op, node     node requests that failed
//
// op is "lock", "extend", "unlock" or "fence"; reason is the round's
// string: won, contended, unreachable, cancelled, expired or
// not_held. node is the node's index in the list given to redlock.New
// (stable and bounded); keys and addresses are never labels.
// redlock_acquire_attempts_total is exported for every reason from the
// start, at 0, so that rate() and ratios work before the first
// occurrence. A round's count by op and reason is
// redlock_round_duration_seconds_count.
//
// Node requests include the replies that arrive after their round was
// decided and the clean-up releases of lost attempts (op "unlock").
//
// redlock_locks_held rises with every won "lock" round and falls when the
// lock ends (released or lost), or when a "fence" round fails (the library
// then undoes the win and no lock ends). It drifts up for a lock that is
// dropped without Unlock and never watched (Done, Err, AutoExtend), and
// for the rare win the library undoes without a failed fence round: a
// win that had no validity left, or a client that found two nodes to be
// one server.
//
// The OpenTelemetry adapter, redlockotel, records the same metrics; the
// OpenTelemetry Prometheus exporter gives them these names.
package redlockprom

import (
	"math"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed543a70bd/redlock"
)

// DefaultBuckets are the bucket boundaries, in seconds, of the duration
// histograms: a round takes about one network round trip, from well under
// a millisecond on a LAN to the per-node timeout.
func DefaultBuckets() []float64 {
	return []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
}

// Collector collects redlock metrics; see the package doc for their
// names. It is safe for concurrent use, and one Collector may serve many
// Clients. Make one with New: the zero Collector and a nil *Collector
// observe nothing, and collect nothing.
type Collector struct {
	roundDur   *prometheus.HistogramVec
	attempts   *prometheus.CounterVec
	extensions prometheus.Counter
	held       prometheus.Gauge
	released   prometheus.Counter
	lost       prometheus.Counter
	holdDur    prometheus.Histogram
	nodeDur    *prometheus.HistogramVec
	nodeErrs   *prometheus.CounterVec
}

var (
	_ prometheus.Collector = (*Collector)(nil)
)

// Option configures New.
type Option func(*config)

type config struct {
	namespace string
	labels    prometheus.Labels
	buckets   []float64
}

// WithNamespace puts ns and an underscore in front of every metric name:
// WithNamespace("billing") gives billing_redlock_locks_held. Default: "",
// names start with redlock_.
func WithNamespace(ns string) Option {
	return func(c *config) { c.namespace = ns }
}

// WithConstLabels adds labels with fixed values to every metric, say the
// service or the lock's purpose when several Clients export side by side
// (register one Collector per Client then). Default: none. Their names
// must not be op, reason or node; registering the Collector fails if
// they are, or are not valid label names.
func WithConstLabels(l prometheus.Labels) Option {
	return func(c *config) { c.labels = l }
}

// WithBuckets sets the bucket boundaries, in seconds, of the three
// duration histograms. Default: DefaultBuckets(). The boundaries are
// copied, sorted and deduplicated, NaNs dropped (client_golang would
// otherwise panic, and for a labelled histogram only at its first
// observation, on a node's goroutine); a b left empty keeps the default.
func WithBuckets(b []float64) Option {
	return func(c *config) {
		var out []float64
		for _, v := range b {
			if !math.IsNaN(v) {
				out = append(out, v)
			}
		}
		slices.Sort(out)
		out = slices.Compact(out)
		if len(out) > 0 {
			c.buckets = out
		}
	}
}

// New returns a Collector, not registered: register it with
// prometheus.MustRegister or a registry of your own.
func New(opts ...Option) *Collector {
	c := config{buckets: DefaultBuckets()}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	name := func(n string) string { return prometheus.BuildFQName(c.namespace, "redlock", n) }
	counter := func(n, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name(n), Help: help, ConstLabels: c.labels})
	}
	histogram := func(n, help string, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name(n), Help: help, ConstLabels: c.labels, Buckets: c.buckets}, labels)
	}
	counterVec := func(n, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name(n), Help: help, ConstLabels: c.labels}, labels)
	}
	m := &Collector{
		roundDur:   histogram("round_duration_seconds", "Duration of redlock rounds (lock, extend, unlock, fence), from the first request to the decision.", "op", "reason"),
		attempts:   counterVec("acquire_attempts_total", "Lock acquisition attempts (lock rounds), by outcome.", "reason"),
		extensions: counter("extensions_total", "Successful lock extensions (Extend or auto-extension)."),
		held:       prometheus.NewGauge(prometheus.GaugeOpts{Name: name("locks_held"), Help: "Locks acquired and not yet released or lost.", ConstLabels: c.labels}),
		released:   counter("locks_released_total", "Locks ended by Unlock."),
		lost:       counter("locks_lost_total", "Locks found lost while held."),
		holdDur: prometheus.NewHistogram(prometheus.HistogramOpts{Name: name("lock_hold_duration_seconds"),
			Help: "How long locks were held, from the acquiring round's start to their end.", ConstLabels: c.labels, Buckets: c.buckets}),
		nodeDur:  histogram("node_request_duration_seconds", "Latency of requests to one node, from the round's start to the reply.", "op", "node"),
		nodeErrs: counterVec("node_errors_total", "Failed requests to one node.", "op", "node"),
	}
	for _, r := range []string{"won", "contended", "unreachable",
		"cancelled", "expired", "not_held"} {
		m.attempts.WithLabelValues(string(r))
	}
	return m
}

func (m *Collector) collectors() []prometheus.Collector {
	if m == nil || m.roundDur == nil {
		return nil
	}
	return []prometheus.Collector{m.roundDur, m.attempts, m.extensions, m.held, m.released, m.lost, m.holdDur, m.nodeDur, m.nodeErrs}
}

// Describe sends the descriptors of the Collector's metrics to ch.
func (m *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect sends the Collector's metrics to ch.
func (m *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// Observe records one of the library's events: give it to
// redlock.WithObserver (as m.Observe). It is safe for concurrent use;
// on a nil or zero Collector it does nothing.
func (m *Collector) Observe(e redlock.Event) {
	switch e.Kind {
	case "node":
		m.observeNode(e)
	case "round":
		m.observeRound(e)
	case "lock":
		m.observeLock(e)
	}
}

// observeNode records a node request's latency and, when it failed, a
// node error.
func (m *Collector) observeNode(e redlock.Event) {
	if m == nil || m.roundDur == nil {
		return
	}
	node := strconv.Itoa(e.Node)
	m.nodeDur.WithLabelValues(string(e.Op), node).Observe(e.Latency.Seconds())
	if e.Status == "failed" {
		m.nodeErrs.WithLabelValues(string(e.Op), node).Inc()
	}
}

// observeRound records a round's duration, acquire attempts and
// extensions, and the locks.held change of a won lock round or a failed
// fence round.
func (m *Collector) observeRound(e redlock.Event) {
	if m == nil || m.roundDur == nil {
		return
	}
	won := e.Reason == "won"
	m.roundDur.WithLabelValues(string(e.Op), string(e.Reason)).Observe(e.Duration.Seconds())
	switch e.Op {
	case "lock":
		m.attempts.WithLabelValues(string(e.Reason)).Inc()
		if won {
			m.held.Inc()
		}
	case "extend":
		if won {
			m.extensions.Inc()
		}
	case "fence":
		if !won {
			// The library undoes the lock round's win: no lock ends.
			m.held.Dec()
		}
	}
}

// observeLock records the end of a lock: locks held, released or lost,
// and the hold time.
func (m *Collector) observeLock(e redlock.Event) {
	if m == nil || m.roundDur == nil {
		return
	}
	m.held.Dec()
	if e.Lost {
		m.lost.Inc()
	} else {
		m.released.Inc()
	}
	m.holdDur.Observe(e.Held.Seconds())
}
