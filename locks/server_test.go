package locks_test

import (
	"strings"
	"testing"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/locks"
)

// Every registered lock names a server kind the cluster can run, and a
// lock that names none is Redis's, in both packages' words.
func TestEveryLockNamesAKindTheClusterRuns(t *testing.T) {
	if locks.ServerRedis != cluster.RedisKind.Name {
		t.Fatalf("locks calls Redis %q, cluster %q", locks.ServerRedis, cluster.RedisKind.Name)
	}
	for _, name := range locks.Names() {
		info, _ := locks.Lookup(name)
		if _, err := cluster.LookupKind(info.Server); err != nil || info.Server == "" {
			t.Errorf("lock %s: server %q: %v", name, info.Server, err)
		}
	}
}

// A lock on another server is built from its nodes' link addresses, and
// refused without them; a Redis lock still needs its clients.
func TestALockOnAnotherServerIsBuiltFromAddrs(t *testing.T) {
	var got locks.Config
	info := locks.Info{Name: "memcached-add", Server: "memcached", New: func(c locks.Config) locks.Lock {
		got = c
		return nil
	}}
	if _, err := locks.Build(info, locks.Config{}); err == nil || !strings.Contains(err.Error(), "Config.Addrs") {
		t.Errorf("built without addresses: %v", err)
	}
	if _, err := locks.Build(info, locks.Config{Addrs: []string{"127.0.0.1:1"}}); err != nil {
		t.Fatal(err)
	}
	if len(got.Addrs) != 1 || got.TTL == 0 {
		t.Errorf("the lock was handed %+v, want its address and the defaults", got)
	}
	redisInfo := locks.Info{Name: "mine", New: func(locks.Config) locks.Lock { return nil }}
	if _, err := locks.Build(redisInfo, locks.Config{Addrs: []string{"127.0.0.1:1"}}); err == nil || !strings.Contains(err.Error(), "no Redis clients") {
		t.Errorf("a Redis lock built without clients: %v", err)
	}
}
