package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// There is no Docker engine in CI, so docker-compose.yml's structure is
// checked here: 5 independent masters on host ports 6381..6385, with
// appendonly and appendfsync always, and no replication anywhere.
func TestDockerCompose(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Image   string   `yaml:"image"`
			Command []string `yaml:"command"`
			Ports   []string `yaml:"ports"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("parse: %v", err)
	}
	if len(doc.Services) != 5 {
		t.Fatalf("want 5 services, got %d", len(doc.Services))
	}
	var hostPorts []string
	for name, s := range doc.Services {
		if !strings.HasPrefix(s.Image, "redis:") {
			t.Errorf("%s: want a redis image, got %q", name, s.Image)
		}
		cmd := strings.Join(s.Command, " ")
		for _, w := range []string{"--appendonly yes", "--appendfsync always"} {
			if !strings.Contains(cmd, w) {
				t.Errorf("%s: want %q in the command, got %q", name, w, cmd)
			}
		}
		if len(s.Ports) != 1 {
			t.Fatalf("%s: want one port mapping, got %v", name, s.Ports)
		}
		host, container, ok := strings.Cut(s.Ports[0], ":")
		if !ok || container != "6379" {
			t.Errorf("%s: want HOST:6379, got %q", name, s.Ports[0])
		}
		hostPorts = append(hostPorts, host)
	}
	slices.Sort(hostPorts)
	if want := []string{"6381", "6382", "6383", "6384", "6385"}; !slices.Equal(hostPorts, want) {
		t.Errorf("want distinct host ports %v, got %v", want, hostPorts)
	}

	// No replication: no replicaof/slaveof key or value anywhere in the
	// parsed document (comments are not content).
	var tree any
	if err := yaml.Unmarshal(b, &tree); err != nil {
		t.Fatal(err)
	}
	walk(tree, func(s string) {
		if l := strings.ToLower(s); strings.Contains(l, "replicaof") || strings.Contains(l, "slaveof") {
			t.Errorf("want no replication, found %q", s)
		}
	})
}

// walk calls f on every key and string value of a decoded YAML tree.
func walk(v any, f func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			f(k)
			walk(x, f)
		}
	case []any:
		for _, x := range v {
			walk(x, f)
		}
	case string:
		f(v)
	}
}
