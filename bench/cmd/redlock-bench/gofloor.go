package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/redis/go-redis/v9"
)

// goFloor is the raw floor (rawFloor) written as a Go program writes it:
// the same commands in raw RESP on one goroutine, but through net.Conn,
// so that every read waits in Go's netpoller (a read that finds nothing
// parks the goroutine, and the runtime's poller wakes it) instead of in
// a ppoll(2) that holds the OS thread. It is what the netpoller costs a
// cycle with nothing else between the caller and the sockets: no
// go-redis, no goroutine per node, no timeouts worth the name. It reads
// the replies in node order (the first 3 nodes, then the others' late
// replies before their next request), so it is not a library either: a
// slow first node holds every cycle.
func goFloor(name string) maker {
	return maker{name: name, nodes: 5, new: func(name string, cs []redis.UniversalClient) (impl, error) {
		g := &goNodes{}
		err := dialEach(cs, func(addr string) error {
			conn, err := net.Dial("tcp", addr)
			if err == nil {
				g.n = append(g.n, &goNode{c: conn})
			}
			return err
		})
		if err != nil {
			g.close()
			return impl{}, fmt.Errorf("go floor: %w", err)
		}
		sha, err := g.loadScript(floorRelease)
		if err != nil {
			g.close()
			return impl{}, err
		}
		return impl{name: name, cycle: respCycle(sha, g.round), closer: g.close}, nil
	}}
}

type goNode struct {
	c       net.Conn
	in      []byte // read, not yet consumed
	pending int    // replies not read yet
}

type goNodes struct{ n []*goNode }

func (g *goNodes) close() {
	for _, nd := range g.n {
		_ = nd.c.Close()
	}
}

// line returns nd's next reply line.
func (nd *goNode) line() (string, error) {
	var tmp [512]byte
	for {
		if k := bytes.Index(nd.in, []byte("\r\n")); k >= 0 {
			l := string(nd.in[:k])
			nd.in = nd.in[k+2:]
			return l, nil
		}
		n, err := nd.c.Read(tmp[:])
		if err != nil {
			return "", err
		}
		nd.in = append(nd.in, tmp[:n]...)
	}
}

func (g *goNodes) loadScript(src string) (string, error) {
	cmd := fmt.Appendf(nil, "*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n$%d\r\n%s\r\n", len(src), src)
	var sha string
	for _, nd := range g.n {
		if _, err := nd.c.Write(cmd); err != nil {
			return "", err
		}
		if _, err := nd.line(); err != nil { // "$40"
			return "", err
		}
		l, err := nd.line()
		if err != nil {
			return "", err
		}
		sha = l
	}
	return sha, nil
}

// round sends cmd to every node, then reads the first 3 nodes' replies.
func (g *goNodes) round(cmd []byte, want string) error {
	for _, nd := range g.n {
		for ; nd.pending > 0; nd.pending-- { // the previous round's late reply
			if _, err := nd.line(); err != nil {
				return err
			}
		}
		if _, err := nd.c.Write(cmd); err != nil {
			return err
		}
		nd.pending = 1
	}
	for i, nd := range g.n[:3] {
		l, err := nd.line()
		if err != nil {
			return err
		}
		nd.pending--
		if l != want {
			return fmt.Errorf("go floor: node %d replied %q", i, l)
		}
	}
	return nil
}

// goRedisFloor is the shape of a Redlock cycle on go-redis with nothing
// else: a goroutine per node that lives as long as the client and runs
// each request it is handed (go-redis's calls block, so each node in
// flight needs a goroutine), and a caller that hands the request to the
// 5 and waits for the first 3 replies. SET NX PX, then the
// compare-and-delete script (EVALSHA, loaded first). No timeouts, no
// pipelining, no release of a partial win, no error handling beyond a
// failed cycle: a floor for any lock library built on go-redis.
func goRedisFloor(name string) maker {
	return maker{name: name, nodes: 5, new: func(name string, cs []redis.UniversalClient) (impl, error) {
		var sha string
		for _, c := range cs {
			s, err := c.ScriptLoad(context.Background(), floorRelease).Result()
			if err != nil {
				return impl{}, err
			}
			sha = s
		}
		type job struct {
			args []any
			want any
			done chan error // buffered: len(cs)
		}
		work := make([]chan job, len(cs))
		for i, c := range cs {
			work[i] = make(chan job, 1)
			go func() {
				for j := range work[i] {
					v, err := c.Do(context.Background(), j.args...).Result()
					if err == nil && v != j.want {
						err = errNotOK
					}
					j.done <- err
				}
			}()
		}
		round := func(args []any, want any) error {
			j := job{args: args, want: want, done: make(chan error, len(cs))}
			for _, w := range work {
				w <- j
			}
			for range 3 {
				if err := <-j.done; err != nil {
					return err
				}
			}
			return nil
		}
		px := ttl.Milliseconds()
		return impl{name: name, cycle: func(ctx context.Context, key string) error {
			if err := round([]any{"set", key, floorToken, "nx", "px", px}, "OK"); err != nil {
				return err
			}
			return round([]any{"evalsha", sha, 1, key, floorToken}, int64(1))
		}, closer: func() {
			for _, w := range work {
				close(w)
			}
		}}, nil
	}}
}

// floorOneScript is the one-node cycle of a lock on go-redis with
// nothing else: SET NX PX, then the compare-and-delete script (EVALSHA,
// loaded first), on the caller's goroutine. The same commands as
// bsm/redislock's and our one-node cycle; the floor that both sit on.
func floorOneScript(name string) maker {
	return maker{name: name, nodes: 1, new: func(name string, cs []redis.UniversalClient) (impl, error) {
		c := cs[0]
		sha, err := c.ScriptLoad(context.Background(), floorRelease).Result()
		if err != nil {
			return impl{}, err
		}
		return impl{name: name, cycle: func(ctx context.Context, key string) error {
			if err := floorSetNX(ctx, c, key); err != nil {
				return err
			}
			n, err := c.EvalSha(ctx, sha, []string{key}, floorToken).Int64()
			if err == nil && n != 1 {
				err = errNotOK
			}
			return err
		}}, nil
	}}
}

// floorRelease is the floors' compare-and-delete script.
const floorRelease = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"

// respCycle is a raw-RESP floor's cycle: SET NX PX, then EVALSHA of the
// release script sha, each sent to every node by round, which returns
// once the quorum replied want.
func respCycle(sha string, round func(cmd []byte, want string) error) func(ctx context.Context, key string) error {
	var buf []byte
	return func(ctx context.Context, key string) error {
		buf = fmt.Appendf(buf[:0], "*6\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$2\r\nNX\r\n$2\r\nPX\r\n$%d\r\n%d\r\n",
			len(key), key, len(floorToken), floorToken, len(fmt.Sprint(ttl.Milliseconds())), ttl.Milliseconds())
		if err := round(buf, "+OK"); err != nil {
			return err
		}
		buf = fmt.Appendf(buf[:0], "*5\r\n$7\r\nEVALSHA\r\n$%d\r\n%s\r\n$1\r\n1\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n",
			len(sha), sha, len(key), key, len(floorToken), floorToken)
		return round(buf, ":1")
	}
}

// dialEach calls dial with the address of each of cs, which must be
// *redis.Client, in order, and stops at the first error.
func dialEach(cs []redis.UniversalClient, dial func(addr string) error) error {
	for _, c := range cs {
		rc, ok := c.(*redis.Client)
		if !ok {
			return errors.New("needs *redis.Client nodes")
		}
		if err := dial(rc.Options().Addr); err != nil {
			return err
		}
	}
	return nil
}
