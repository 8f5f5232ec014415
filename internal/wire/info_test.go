package wire

import (
	"testing"
	"time"
)

func TestParseInfo(t *testing.T) {
	const redisMaster = "# Server\r\nredis_version:7.0.15\r\nrun_id:abc\r\nuptime_in_seconds:42\r\n\r\n# Memory\r\nmaxmemory:104857600\r\nmaxmemory_policy:allkeys-lru\r\n\r\n# Persistence\r\nrdb_last_save_time:1700000000\r\naof_enabled:1\r\n\r\n# Replication\r\nrole:master\r\nconnected_slaves:2\r\n"
	const valkeyReplica = "# Server\nredis_version:7.2.4\nserver_name:valkey\nvalkey_version:8.0.1\nrun_id:def\n# Replication\nrole:slave\nmaster_host:10.0.0.1\nmaster_port:6379\nslave_read_only:0\nconnected_slaves:0\n"
	tests := []struct {
		name string
		text string
		want ServerInfo
	}{
		{"redis master", redisMaster, ServerInfo{Server: "redis", Version: "7.0.15", RunID: "abc", Uptime: 42 * time.Second,
			Role: "master", Replicas: 2, AOF: true, LastSave: time.Unix(1700000000, 0), MaxMemory: 100 << 20, Policy: "allkeys-lru"}},
		{"valkey replica", valkeyReplica, ServerInfo{Server: "valkey", Version: "8.0.1", RunID: "def", Role: "replica",
			MasterAddr: "10.0.0.1:6379", ReadOnlyKnown: true}},
		{"empty", "", ServerInfo{Server: "redis"}},
		{"garbage", "no colon here\n#:x\nuptime_in_seconds:soon\n", ServerInfo{Server: "redis"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ParseInfo(tc.text); got != tc.want {
				t.Errorf("want %+v, got %+v", tc.want, got)
			}
		})
	}
}
