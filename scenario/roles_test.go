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
