package nemesis_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
)

// BenchmarkHookCost is what the gate's hook costs a lock: set-nx-px
// acquire+release cycles on one client, straight to the node, plain; with
// the hook and the workload's Begin/End around each op; and with a trap
// armed that every command is matched against and none fits.
//
//	go test -run '^$' -bench HookCost -benchtime 2s ./nemesis/
func BenchmarkHookCost(b *testing.B) {
	cl, err := cluster.Start(ctx, cluster.Options{}, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	for _, mode := range []string{"plain", "hooked", "hooked+trap"} {
		b.Run(mode, func(b *testing.B) {
			c := cluster.NewClient(cl.Nodes()[0].Addr(), cluster.ClientOptions{Timeout: 2 * time.Second})
			defer c.Close()
			g := nemesis.NewGate(history.NewRecorder(nil, 0))
			if mode != "plain" {
				c.AddHook(g.Hook(0, 0, true))
			}
			if mode == "hooked+trap" {
				g.Arm(nemesis.Trap{Client: 0, Command: &nemesis.Command{In: history.Release, Match: "DEL", After: "GET"}, Pause: time.Hour})
			}
			l, err := locks.New("set-nx-px", locks.Config{Clients: []redis.UniversalClient{c}, TTL: 10 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				g.Begin(context.Background(), 0, 0, history.Acquire)
				lease, err := l.Acquire(ctx, "k")
				g.End(0, 0)
				if err != nil {
					b.Fatal(err)
				}
				g.Begin(context.Background(), 0, 0, history.Release)
				err = l.Release(ctx, lease)
				g.End(0, 0)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
		})
	}
}
