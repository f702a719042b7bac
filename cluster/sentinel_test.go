package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Sentinels started together know each other from their configs: each
// runs as the id its config gave it (made from its port) and names its
// peers by the ids their configs gave them, which no hello could have
// told it (hellos carry the id a sentinel runs as, random without the
// config's). AddSentinels returns with every peer up and answering.
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
	for _, n := range s.Nodes {
		id, err := n.Do(ctx, "SENTINEL", "MYID")
		if err != nil {
			t.Fatal(err)
		}
		if want := sentinelID(n.Info().Port); fmt.Sprint(id) != want {
			t.Errorf("%s runs as %v, not its config's %s", n.Name, id, want)
		}
		peers, err := n.Do(ctx, "SENTINEL", "SENTINELS", s.Options.MasterName)
		if err != nil {
			t.Fatal(err)
		}
		named := map[string]bool{}
		for _, p := range peers.([]any) {
			named[field(p, "runid")] = true
		}
		for _, o := range s.Nodes {
			if o != n && !named[sentinelID(o.Info().Port)] {
				t.Errorf("%s names peers %v, not %s by its config's id", n.Name, named, o.Name)
			}
		}
		if len(named) != len(s.Nodes)-1 {
			t.Errorf("%s names %d peers, want %d", n.Name, len(named), len(s.Nodes)-1)
		}
	}
}
