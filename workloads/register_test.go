package workloads_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/workloads"
)

// A client that dies between SETNX and EXPIRE, caught by a command trap on
// its connections (the lock calls nothing): its acquire is info, its
// process retired (never heard of again), and the key stays as Redis has
// it, with no TTL.
func TestClientCrashMidProtocol(t *testing.T) {
	ctx := context.Background()
	cl, err := cluster.Start(ctx, cluster.Options{}, 2) // n1 lock, n2 store
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	lockNode, storeNode := cl.Nodes()[0], cl.Nodes()[1]
	rec := history.NewRecorder(nil, 2)
	gate := nemesis.NewGate(rec)
	gate.Arm(nemesis.Trap{Command: &nemesis.Command{In: history.Acquire, Match: "SET NX", Reply: true, Succeeded: true},
		Client: nemesis.AnyClient, Crash: true})
	o := workloads.Options{Key: "lock", Register: "register", Gate: gate}
	for i := 0; i < 2; i++ {
		o.Clients = append(o.Clients, workloads.Client{
			Clock: locks.SystemClock{},
			Open: func(process int) (workloads.Process, error) {
				lc := cluster.NewClient(lockNode.Addr(), cluster.ClientOptions{})
				sc := cluster.NewClient(storeNode.Addr(), cluster.ClientOptions{})
				lc.AddHook(gate.Hook(i, process, true))
				sc.AddHook(gate.Hook(i, process, false))
				l, err := locks.New("setnx-expire", locks.Config{Clients: []redis.UniversalClient{lc}, TTL: time.Second,
					Wait: 100 * time.Millisecond})
				return workloads.Process{Lock: l, Store: workloads.NewStore(sc),
					Close: func() { lc.Close(); sc.Close() }}, err
			},
		})
	}
	clients, err := workloads.Open(rec, o)
	if err != nil {
		t.Fatal(err)
	}
	stop, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := clients.Run(stop, ctx); err != nil {
		t.Fatal(err)
	}
	ops := rec.Ops()
	crashed := -1
	for _, op := range ops {
		if op.F == history.Acquire && op.Type == history.Info && strings.Contains(op.Error, "crashed") {
			crashed = op.Process
		}
	}
	if crashed < 0 {
		t.Fatal("no info acquire from the crashed client")
	}
	seenInfo := false
	for _, op := range ops {
		if op.Process == crashed && op.Type == history.Info {
			seenInfo = true
		} else if op.Process == crashed && seenInfo {
			t.Fatalf("retired process %d went on: %+v", crashed, op)
		}
	}
	if ttl := cluster.NewClient(lockNode.Addr(), cluster.ClientOptions{}).PTTL(ctx, "lock").Val(); ttl != -1 {
		t.Fatalf("the crashed client's key should be there with no TTL (PTTL -1), got %v", ttl)
	}
}
