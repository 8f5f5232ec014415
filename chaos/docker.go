package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"
	"github.com/redis/go-redis/v9"
)

// Docker is a Backend of Redis containers run through
// github.com/ory/dockertest/v3. It is used only where a Docker engine
// answers (NewDocker pings it); the machines this project is developed
// on have none, so this path is compiled and kept small but not run by
// the test suite.
//
// Kill sends SIGKILL to the container, Pause and Resume use the cgroup
// freezer (docker pause), Restart starts the killed container again.
// Each container publishes its port on a fixed loopback port chosen at
// Start, so that its address survives restarts.
type Docker struct {
	Pool       *dockertest.Pool
	Repository string // Default: "redis"
	Tag        string // Default: "7"
}

var _ Backend = (*Docker)(nil)

// NewDocker connects to the Docker engine named by DOCKER_HOST (or the
// platform default) and pings it. It returns an error matching
// ErrBackend when no engine answers.
func NewDocker() (*Docker, error) {
	pool, err := dockertest.NewPool("")
	if err == nil {
		err = pool.Client.Ping()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: no Docker engine: %w", ErrBackend, err)
	}
	pool.MaxWait = 30 * time.Second
	return &Docker{Pool: pool, Repository: "redis", Tag: "7"}, nil
}

// Name returns "docker".
func (d *Docker) Name() string { return "docker" }

// Start runs one Redis container and waits until it answers PING.
func (d *Docker) Start(ctx context.Context, opts NodeOptions) (Node, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := []string{"redis-server", "--save", "", "--appendonly", "no"}
	if opts.AppendOnly {
		cmd = []string{"redis-server", "--appendonly", "yes", "--appendfsync", "always"}
	}
	res, err := d.Pool.RunWithOptions(&dockertest.RunOptions{
		Repository: d.Repository,
		Tag:        d.Tag,
		Cmd:        cmd,
		PortBindings: map[dc.Port][]dc.PortBinding{
			"6379/tcp": {{HostIP: "127.0.0.1", HostPort: strconv.Itoa(port)}},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBackend, err)
	}
	n := &dockerNode{pool: d.Pool, res: res, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	if err := n.waitReady(ctx); err != nil {
		_ = d.Pool.Purge(res)
		return nil, err
	}
	return n, nil
}

type dockerNode struct {
	pool *dockertest.Pool
	res  *dockertest.Resource
	addr string
	mu   sync.Mutex
}

var _ Node = (*dockerNode)(nil)

func (n *dockerNode) Addr() string { return n.addr }

func (n *dockerNode) Kill() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	_ = n.pool.Client.UnpauseContainer(n.res.Container.ID)
	err := n.pool.Client.KillContainer(dc.KillContainerOptions{ID: n.res.Container.ID, Signal: dc.SIGKILL})
	var notRunning *dc.ContainerNotRunning
	if errors.As(err, &notRunning) {
		return nil
	}
	return err
}

func (n *dockerNode) Pause() error { return n.pool.Client.PauseContainer(n.res.Container.ID) }

func (n *dockerNode) Resume() error { return n.pool.Client.UnpauseContainer(n.res.Container.ID) }

func (n *dockerNode) Restart() error {
	if err := n.Kill(); err != nil {
		return err
	}
	if err := n.pool.Client.StartContainer(n.res.Container.ID, nil); err != nil {
		return err
	}
	return n.waitReady(context.Background())
}

func (n *dockerNode) Close() error { return n.pool.Purge(n.res) }

// waitReady pings the node until it answers, within the pool's MaxWait.
func (n *dockerNode) waitReady(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: n.addr, MaxRetries: -1})
	defer c.Close()
	return n.pool.Retry(func() error { return c.Ping(ctx).Err() })
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
