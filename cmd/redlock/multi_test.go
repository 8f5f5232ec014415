package main

import "testing"

// --multi needs every node: with one of three down it cannot lock, where
// the quorum default can.
func TestRunMulti(t *testing.T) {
	nodes, clients, urls := cluster(t, 3)
	key := testKey(t)
	r := cli(t, nil, "run", "--multi", "--nodes", urls, "--key", key, "--wait", "0", "--", "sh", "-c", "exit 6")
	if r.code != 6 {
		t.Fatalf("every node up: want the command's exit 6, got %d; stderr:\n%s", r.code, r.stderr)
	}
	released(t, clients, key, 3)
	if err := nodes[2].Kill(); err != nil {
		t.Fatal(err)
	}
	r = cli(t, nil, "run", "--multi", "--nodes", urls, "--key", key, "--wait", "0", "--", "true")
	if r.code != exitNotObtained {
		t.Fatalf("a node down: want exit %d, got %d; stderr:\n%s", exitNotObtained, r.code, r.stderr)
	}
	r = cli(t, nil, "run", "--nodes", urls, "--key", key, "--wait", "0", "--", "true")
	if r.code != exitOK {
		t.Fatalf("a node down, quorum: want exit 0, got %d; stderr:\n%s", r.code, r.stderr)
	}
}

// A MultiLock over no nodes is refused with an error, and no locker.
func TestNewMultiLockerRefusesNoNodes(t *testing.T) {
	m, err := newMultiLocker(nil)
	if err == nil || m != nil {
		t.Fatalf("want an error and no locker, got %v, %v", m, err)
	}
}
