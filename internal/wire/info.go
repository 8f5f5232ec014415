package wire

import (
	"strconv"
	"strings"
	"time"
)

// ServerInfo is what the health check reads of a node's INFO reply (the
// default sections: server, memory, persistence, replication, ...).
// Fields the reply lacks keep their zero value.
type ServerInfo struct {
	// Server is "valkey" when the reply says server_name:valkey, else
	// "redis". Version is the server's own: valkey_version on Valkey,
	// whose redis_version is the Redis version it is compatible with
	// (7.2.4 on Valkey 8).
	Server, Version string
	RunID           string
	Uptime          time.Duration
	// Role is "master" or "replica" (INFO says "slave").
	Role     string
	Replicas int // connected_slaves
	// MasterAddr is a replica's master, "host:port".
	MasterAddr string
	// ReadOnly is a replica's slave_read_only: false when it takes
	// writes (replica-read-only no). Known says whether the reply had it.
	ReadOnly, ReadOnlyKnown bool
	AOF                     bool      // aof_enabled:1
	LastSave                time.Time // rdb_last_save_time; zero when absent
	MaxMemory               int64     // bytes; 0: no limit
	Policy                  string    // maxmemory_policy
}

// ParseInfo reads the fields of ServerInfo from an INFO reply; it never
// fails: what it cannot read stays zero.
func ParseInfo(text string) ServerInfo {
	f := InfoFields(text)
	si := ServerInfo{
		Server:    "redis",
		Version:   f["redis_version"],
		RunID:     f["run_id"],
		Role:      f["role"],
		Policy:    f["maxmemory_policy"],
		AOF:       f["aof_enabled"] == "1",
		Replicas:  atoi(f["connected_slaves"]),
		MaxMemory: int64(atoi(f["maxmemory"])),
		Uptime:    time.Duration(atoi(f["uptime_in_seconds"])) * time.Second,
	}
	if f["server_name"] == "valkey" || f["valkey_version"] != "" {
		si.Server = "valkey"
		if v := f["valkey_version"]; v != "" {
			si.Version = v
		}
	}
	if si.Role == "slave" {
		si.Role = "replica"
	}
	if h := f["master_host"]; h != "" {
		si.MasterAddr = h + ":" + f["master_port"]
	}
	if v, ok := f["slave_read_only"]; ok {
		si.ReadOnly, si.ReadOnlyKnown = v == "1", true
	} else if v, ok := f["replica_read_only"]; ok {
		si.ReadOnly, si.ReadOnlyKnown = v == "1", true
	}
	if s := atoi(f["rdb_last_save_time"]); s > 0 {
		si.LastSave = time.Unix(int64(s), 0)
	}
	return si
}

// InfoFields returns the "name:value" lines of an INFO reply as a map;
// section headers ("# Server") and blank lines are skipped.
func InfoFields(text string) map[string]string {
	f := make(map[string]string, 64)
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			f[k] = v
		}
	}
	return f
}

// atoi is strconv.Atoi that reads anything unparsable as 0.
func atoi(s string) int {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0
	}
	return int(n)
}
