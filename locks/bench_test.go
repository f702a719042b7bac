package locks_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/locks"
)

// BenchmarkCycle measures one acquire+release of each lock at 1 and 16
// clients, each client on its own key (the lock's cost, not contention),
// with its own connections, straight to the nodes (no proxy). raw-SET is a
// plain SET on the same first node at the same concurrency: the ceiling.
//
//	go test -run '^$' -bench Cycle -benchtime 2s ./locks/
func BenchmarkCycle(b *testing.B) {
	cl, err := cluster.Start(context.Background(), cluster.Options{}, 5)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("raw-SET/clients=%d", clients), func(b *testing.B) {
			runClients(b, cl, clients, func(c []redis.UniversalClient) func(ctx context.Context, key string) error {
				return func(ctx context.Context, key string) error { return c[0].Set(ctx, key, "v", 0).Err() }
			})
		})
		for _, name := range locks.Names() {
			b.Run(fmt.Sprintf("%s/clients=%d", name, clients), func(b *testing.B) {
				runClients(b, cl, clients, func(c []redis.UniversalClient) func(ctx context.Context, key string) error {
					info, _ := locks.Lookup(name)
					l, err := locks.New(name, locks.Config{Clients: c[:info.Nodes], TTL: 10 * time.Second})
					if err != nil {
						b.Fatal(err)
					}
					return func(ctx context.Context, key string) error {
						lease, err := l.Acquire(ctx, key)
						if err != nil {
							return err
						}
						return l.Release(ctx, lease)
					}
				})
			})
		}
	}
}

// runClients splits b.N cycles among n clients and reports cycles/s.
func runClients(b *testing.B, cl *cluster.Cluster, n int, setup func([]redis.UniversalClient) func(context.Context, string) error) {
	ctx := context.Background()
	var cycles []func(context.Context, string) error
	for i := 0; i < n; i++ {
		var conns []redis.UniversalClient
		for _, node := range cl.Nodes() {
			c := cluster.NewClient(node.Addr(), cluster.ClientOptions{Timeout: 2 * time.Second})
			defer c.Close()
			conns = append(conns, c)
		}
		cycles = append(cycles, setup(conns))
	}
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	for i, cycle := range cycles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("%s-%d", b.Name(), i) // no leftovers from another lock
			for left.Add(-1) >= 0 {
				if err := cycle(ctx, key); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
}
