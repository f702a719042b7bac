package nemesis

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// Grudge says, for each peer (a client, a replica's replication link, or
// on a backend with a Firewall any server), which nodes it cannot reach.
// It is Jepsen's notion: partitions are drawn per link, so client 1 can
// reach A,B,C while client 2 reaches C,D,E. A link between two servers
// is cut both ways; a node always reaches itself, so a shape drawn with
// the nodes as their own peers (Halves(nodes, nodes)) splits the servers
// as Jepsen's shapes split a database's nodes.
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

// cut is the grudge as a site records it: a copy, so the history keeps
// the grudge as it was cut.
func (g Grudge) cut() map[string][]string {
	out := make(map[string][]string, len(g))
	for p, nodes := range g {
		out[p] = slices.Clone(nodes)
	}
	return out
}

// Apart reports whether the grudge keeps two servers apart: a link
// between servers is cut both ways, so either one's grudge against the
// other is enough.
func (g Grudge) Apart(a, b string) bool {
	return a != b && (slices.Contains(g[a], b) || slices.Contains(g[b], a))
}

// Partition cuts every link the grudge names. Links not named are left
// alone; a second Partition adds to the first. Heal undoes them all.
func (n *Nemesis) Partition(g Grudge) error {
	v := &history.Value{Target: g.String(), Site: &history.Site{Cut: g.cut()}}
	return record(n.rec, fault.PartitionStart, v, func() error {
		for peer, nodes := range g {
			for _, name := range nodes {
				if name == peer {
					continue
				}
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

// CutDirection cuts one direction of peer's link to node: "upstream"
// (what the peer sends: requests, a replica's acknowledgements) or
// "downstream" (what the node sends: replies, the replication stream).
// Heal undoes it.
func (n *Nemesis) CutDirection(peer, node, direction string) error {
	v := &history.Value{Target: fmt.Sprintf("%s↛%s %s only", peer, node, direction),
		Site: &history.Site{Peer: peer, Node: node, Direction: direction}}
	return record(n.rec, fault.PartitionStart, v, func() error {
		l, err := n.link(peer, node)
		if err != nil {
			return err
		}
		return l.CutDirection(direction)
	})
}

// Heal restores every link of every node: no partition, no latency.
func (n *Nemesis) Heal() error {
	n.mu.Lock()
	clear(n.delayed)
	n.mu.Unlock()
	return record(n.rec, fault.PartitionEnd, &history.Value{Target: "all links", Site: &history.Site{All: true}}, func() error {
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
// the node. Zero on a link nothing delayed does nothing and records
// nothing: a sweep's point of no delay (lag=0) has no fault to end.
func (n *Nemesis) Latency(peer, node string, latency, jitter time.Duration) error {
	target := fmt.Sprintf("%s→%s %s±%s", orAll(peer), node, latency, jitter)
	off := latency == 0 && jitter == 0
	if was := n.delay(peer, node, !off); off && !was {
		return nil
	}
	f := fault.LatencyStart
	if off {
		f = fault.LatencyEnd
	}
	v := &history.Value{Target: target, Duration: int64(latency), Site: &history.Site{Peer: peer, Node: node}}
	return record(n.rec, f, v, func() error {
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

// delay notes whether the link from peer to node (an empty peer: every
// link of node) is now delayed, and says whether any of those links was.
func (n *Nemesis) delay(peer, node string, on bool) (was bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for link, d := range n.delayed {
		if d && link[1] == node && (peer == "" || link[0] == "" || link[0] == peer) {
			was = true
			if !on && (peer == "" || link[0] == peer) {
				delete(n.delayed, link)
			}
		}
	}
	if on {
		n.delayed[[2]string{peer, node}] = true
	}
	return was
}

// LatencyDirection is Latency on one direction of the link: "upstream"
// (requests, peer → node) or "downstream" (replies). Only requests delayed:
// a write that lands late, its reply on time (K2).
func (n *Nemesis) LatencyDirection(peer, node, direction string, latency, jitter time.Duration) error {
	target := fmt.Sprintf("%s→%s %s %s±%s", peer, node, direction, latency, jitter)
	v := &history.Value{Target: target, Duration: int64(latency), Site: &history.Site{Peer: peer, Node: node, Direction: direction}}
	n.delay(peer, node, true)
	return record(n.rec, fault.LatencyStart, v, func() error {
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

// MajoritiesRing gives every peer its own majority of the nodes: the
// window of a majority's size around its place on a ring, so any two
// peers share a node and no two see the same majority (Jepsen's
// partition-majorities-ring). Centred, so that with the nodes as their own
// peers the shape is symmetric: n1 sees n2 exactly when n2 sees n1.
func MajoritiesRing(nodes, peers []string) Grudge {
	g := Grudge{}
	m := len(nodes)/2 + 1
	for i, p := range peers {
		seen := map[string]bool{}
		for j := 0; j < m; j++ {
			seen[nodes[(i-(m-1)/2+j+len(nodes))%len(nodes)]] = true
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
// second the other side and the bridge (Jepsen's bridge). The bridge
// itself, when it is among the peers, reaches everyone.
func Bridge(nodes, peers []string) Grudge {
	mid := len(nodes) / 2
	left, right := nodes[:mid], nodes[mid+1:]
	pa, pb := split(peers, (len(peers)+1)/2)
	g := Grudge{}
	for _, p := range pa {
		if p != nodes[mid] {
			g[p] = append([]string(nil), right...)
		}
	}
	for _, p := range pb {
		if p != nodes[mid] {
			g[p] = append([]string(nil), left...)
		}
	}
	return g
}
