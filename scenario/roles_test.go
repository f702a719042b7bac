package scenario

import (
	"slices"
	"testing"
)

// The RedLock split names nodes by their place around the middle one, so
// it tells the same story on any odd count: of seven, client 0 keeps
// n1..n4 and client 1 n4..n7, sharing n4. An even count has no middle.
func TestMiddleRolesSplitAnyOddCount(t *testing.T) {
	c := &compiler{e: &Env{Nodes: []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7"}}}
	for ref, want := range map[string][]string{
		"middle":       {"n4"},
		"below-middle": {"n1", "n2", "n3"},
		"above-middle": {"n5", "n6", "n7"},
		"all":          c.e.Nodes,
	} {
		if got, err := c.nodes("cut", ref); err != nil || !slices.Equal(got, want) {
			t.Errorf("%s of seven: %v %v, want %v", ref, got, err, want)
		}
	}
	even := &compiler{e: &Env{Nodes: []string{"n1", "n2", "n3", "n4"}}}
	for _, ref := range []string{"middle", "below-middle", "above-middle"} {
		if _, err := even.nodes("cut", ref); err == nil {
			t.Errorf("%s of four: want an error", ref)
		}
	}
}

// "every client" cuts each of the run's clients, however many it has;
// "client 1" only that one; a peer of no known form is refused.
func TestPeersEveryClient(t *testing.T) {
	c := &compiler{e: &Env{Clients: []string{"c0", "c1", "c2"}}}
	for ref, want := range map[string][]string{
		"every client": {"c0", "c1", "c2"},
		"client 1":     {"c1"},
	} {
		from, err := c.peers("cut", ref)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if got, err := from(0); err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %v %v, want %v", ref, got, err, want)
		}
	}
	if _, err := c.peers("cut", "clients"); err == nil {
		t.Error(`"clients": want an error`)
	}
}
