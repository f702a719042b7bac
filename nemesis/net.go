package nemesis

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/locktorture/locktorture/history"
)

// Grudge says, for each peer (a client, or a replica's replication link),
// which nodes it cannot reach. It is Jepsen's notion: partitions are drawn
// per link, so client 1 can reach A,B,C while client 2 reaches C,D,E.
type Grudge map[string][]string

// String is a stable one-line description for the history.
func (g Grudge) String() string {
	peers := make([]string, 0, len(g))
	for p := range g {
		peers = append(peers, p)
	}
	sort.Strings(peers)
	var parts []string
	for _, p := range peers {
		parts = append(parts, p+"↛"+strings.Join(g[p], ","))
	}
	return strings.Join(parts, " ")
}

// Partition cuts every link the grudge names. Links not named are left
// alone; a second Partition adds to the first. Heal undoes them all.
func (n *Nemesis) Partition(g Grudge) error {
	return record(n.rec, "partition-start", &history.Value{Target: g.String()}, func() error {
		for peer, nodes := range g {
			for _, name := range nodes {
				l, err := n.link(peer, name)
				if err != nil {
					return err
				}
				if err := l.Cut(); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// Heal restores every link of every node: no partition, no latency.
func (n *Nemesis) Heal() error {
	return record(n.rec, "partition-end", &history.Value{Target: "all links"}, func() error {
		for _, nd := range n.cl.Nodes() {
			if err := nd.Heal(); err != nil {
				return err
			}
		}
		return nil
	})
}

// Latency delays the link from peer to node by latency ± jitter in both
// directions; zero removes the delay. An empty peer means every link of
// the node.
func (n *Nemesis) Latency(peer, node string, latency, jitter time.Duration) error {
	target := fmt.Sprintf("%s→%s %s±%s", orAll(peer), node, latency, jitter)
	f := "latency-start"
	if latency == 0 && jitter == 0 {
		f = "latency-end"
	}
	return record(n.rec, f, &history.Value{Target: target, Duration: int64(latency)}, func() error {
		if peer == "" {
			nd, err := n.node(node)
			if err != nil {
				return err
			}
			return nd.SetLatency(latency, jitter)
		}
		l, err := n.link(peer, node)
		if err != nil {
			return err
		}
		return l.SetLatency(latency, jitter)
	})
}

// LatencyDirection is Latency on one direction of the link: "upstream"
// (requests, peer → node) or "downstream" (replies). Only requests delayed:
// a write that lands late, its reply on time (K2).
func (n *Nemesis) LatencyDirection(peer, node, direction string, latency, jitter time.Duration) error {
	target := fmt.Sprintf("%s→%s %s %s±%s", peer, node, direction, latency, jitter)
	return record(n.rec, "latency-start", &history.Value{Target: target, Duration: int64(latency)}, func() error {
		l, err := n.link(peer, node)
		if err != nil {
			return err
		}
		return l.SetLatencyDirection(direction, latency, jitter)
	})
}

func orAll(peer string) string {
	if peer == "" {
		return "all"
	}
	return peer
}

// IsolateNode is the grudge that cuts node off from every peer.
func IsolateNode(node string, peers []string) Grudge {
	g := Grudge{}
	for _, p := range peers {
		g[p] = []string{node}
	}
	return g
}

// split cuts s into a first part of size k and the rest.
func split(s []string, k int) ([]string, []string) {
	return append([]string(nil), s[:k]...), append([]string(nil), s[k:]...)
}

// Halves splits nodes into a majority and a minority and the peers into
// two groups: the first group reaches only the majority, the second only
// the minority (Jepsen's partition-halves, seen from the clients).
func Halves(nodes, peers []string) Grudge {
	major, minor := split(nodes, len(nodes)/2+1)
	pa, pb := split(peers, (len(peers)+1)/2)
	g := Grudge{}
	for _, p := range pa {
		g[p] = minor
	}
	for _, p := range pb {
		g[p] = major
	}
	return g
}

// MajoritiesRing gives every peer its own majority of the nodes, each
// shifted by one along a ring: any two peers share a node, no two see the
// same majority (Jepsen's partition-majorities-ring).
func MajoritiesRing(nodes, peers []string) Grudge {
	g := Grudge{}
	m := len(nodes)/2 + 1
	for i, p := range peers {
		seen := map[string]bool{}
		for j := 0; j < m; j++ {
			seen[nodes[(i+j)%len(nodes)]] = true
		}
		for _, nd := range nodes {
			if !seen[nd] {
				g[p] = append(g[p], nd)
			}
		}
	}
	return g
}

// Bridge splits the nodes into two sides around one bridge node in the
// middle: the first group of peers reaches one side and the bridge, the
// second the other side and the bridge (Jepsen's bridge).
func Bridge(nodes, peers []string) Grudge {
	mid := len(nodes) / 2
	left, right := nodes[:mid], nodes[mid+1:]
	pa, pb := split(peers, (len(peers)+1)/2)
	g := Grudge{}
	for _, p := range pa {
		g[p] = append([]string(nil), right...)
	}
	for _, p := range pb {
		g[p] = append([]string(nil), left...)
	}
	return g
}
