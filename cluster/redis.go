package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// RedisKind is a redis-server data node: the kind of a lock that names
// none (locks.Info.Server), and of the harness's own store. Ready asks it for
// its process id and its data, so a start counts only once our process
// answers with its AOF loaded.
var RedisKind = &Kind{
	// Measured (docs/ci-and-benchmarks.md): the 230 Redis pairs whose
	// clients are Go, four at a time on two cores, kept every verdict,
	// idle and beside two busy loops, using 0.8 of a core on average.
	Light:       "a Redis pair with its clients in the harness uses under half a core: its servers answer in microseconds and its clients wait on them",
	Name:        "redis",
	Binary:      "redis-server",
	Install:     "install it with `go run github.com/locktorture/locktorture/cmd/setup` (apt-get install redis-server) or pass its path",
	Persistence: []Persistence{NoPersistence, AOFEverySec, AOFAlways},
	Args: func(spec ServerSpec, at Place) ([]string, error) {
		return spec.RedisArgs(at.Bind, at.Port, at.Dir), nil
	},
	Ready: func(_ context.Context, addr string) (int, error) { return Answering(addr) },
	Log:   "redis.log",
	Unsynced: func(p Persistence) (string, time.Duration) {
		if p == AOFEverySec {
			return filepath.Join("appendonlydir", "*.incr.aof"), time.Second
		}
		return "", 0
	},
	FaketimeBinary: redisFaketimeBinary,
	Reset:          redisReset,
	RESP:           true,
}

// SentinelKind is a redis-sentinel watching one master, as AddSentinels
// starts it: its config file is written once, with its peers where they
// start together, and sentinel rewrites it with what it learns, which a
// restart keeps.
var SentinelKind = &Kind{
	Name:    "sentinel",
	Binary:  "redis-sentinel",
	Install: "install it with `make setup` (apt-get install redis-sentinel)",
	Args: func(spec ServerSpec, at Place) ([]string, error) {
		if spec.Sentinel == nil {
			return nil, fmt.Errorf("cluster: %s: a sentinel is started by AddSentinels, which says what it watches", spec.Name)
		}
		conf := filepath.Join(at.Dir, "sentinel.conf")
		if err := os.WriteFile(conf, []byte(spec.Sentinel.File(at.Bind, at.Port, at.Dir)+spec.Sentinel.Peers(at)), 0o644); err != nil {
			return nil, err
		}
		return []string{conf}, nil
	},
	Ready: func(_ context.Context, addr string) (int, error) { return Answering(addr) },
	Log:   "sentinel.log",
	RESP:  true,
}

// redisFaketimeBinary is the libc-allocator redis-server a node with a
// faked clock runs: Debian's jemalloc build hangs under libfaketime.
func redisFaketimeBinary(o Options) (string, error) {
	server := o.FaketimeServer
	if server == "" {
		server = FaketimeServerPath()
	}
	if _, err := os.Stat(server); err != nil {
		return "", fmt.Errorf("cluster: a faked node clock needs redis-server built with the libc allocator at %s: run `make setup` (scripts/build-faketime-redis.sh); Debian's jemalloc build hangs under libfaketime", server)
	}
	return server, nil
}

// redisReset empties the Redis on addr of its keys, its scripts and
// functions, and its counters (INFO stats: evicted_keys, say), and checks
// it then holds no key. It does not undo a CONFIG SET a client may have
// sent: a Redis lock node whose clients are the subject's is not reused
// (engine), only the harness's own store.
func redisReset(ctx context.Context, addr string) error {
	c := NewClient(addr, ClientOptions{Timeout: 2 * time.Second, PoolSize: 1})
	defer c.Close()
	for _, cmd := range [][]any{{"FLUSHALL", "SYNC"}, {"SCRIPT", "FLUSH", "SYNC"}, {"FUNCTION", "FLUSH", "SYNC"}, {"CONFIG", "RESETSTAT"}} {
		if err := c.Do(ctx, cmd...).Err(); err != nil {
			return fmt.Errorf("%v: %w", cmd, err)
		}
	}
	n, err := c.DBSize(ctx).Result()
	if err != nil {
		return err
	}
	if n != 0 {
		return fmt.Errorf("%d keys left", n)
	}
	return nil
}
