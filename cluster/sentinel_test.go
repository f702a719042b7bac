package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// Sentinels started together know each other from their configs, by the
// ids each runs as, and over links that are up when AddSentinels returns:
// no hello had to come first. Each names the others as they name
// themselves, or a failover's vote would count a peer twice.
func TestSentinelsStartKnowingEachOther(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx, Options{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	m, r := c.Nodes()[0], c.Nodes()[1]
	if err := r.ReplicaOf(ctx, m); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	s, err := c.AddSentinels(ctx, SentinelOptions{Master: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("AddSentinels took %s", time.Since(began))
	ids := map[string]string{}
	for _, n := range s.Nodes {
		id, err := n.Do(ctx, "SENTINEL", "MYID")
		if err != nil {
			t.Fatal(err)
		}
		ids[n.Name] = fmt.Sprint(id)
	}
	for _, n := range s.Nodes {
		peers, err := n.Do(ctx, "SENTINEL", "SENTINELS", s.Options.MasterName)
		if err != nil {
			t.Fatal(err)
		}
		var named []string
		for _, p := range peers.([]any) {
			named = append(named, field(p, "runid"))
			if f := field(p, "flags"); f != "sentinel" {
				t.Errorf("%s: a peer's flags are %q, want just sentinel", n.Name, f)
			}
		}
		for _, o := range s.Nodes {
			if o != n && !slices.Contains(named, ids[o.Name]) {
				t.Errorf("%s names peers %v, not %s's id %s", n.Name, named, o.Name, ids[o.Name])
			}
		}
		if len(named) != len(s.Nodes)-1 {
			t.Errorf("%s names %d peers, want %d", n.Name, len(named), len(s.Nodes)-1)
		}
	}
}
