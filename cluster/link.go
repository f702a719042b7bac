package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
)

// Link is one peer's own road to a node: an in-process toxiproxy proxy on a
// loopback port. Giving every (peer, node) pair its own proxy is what lets a
// nemesis cut client 1 off from C while client 2 still reaches it.
//
// Between two servers of a backend with a Firewall (any two containers in
// docker: a replica and its master, a sentinel and the node it watches) the
// link is the network itself: no proxy, and a cut is packets dropped in the
// receiving server's kernel.
type Link struct {
	// Peer names who uses the link (a client, "store-client", a replica).
	Peer string
	// Node is the node the link leads to.
	Node string

	mu    sync.Mutex
	proxy *toxiproxy.Proxy
	// claim keeps the proxy's port this link's while it lives (linkPort).
	claim net.Listener
	// toxic says a fault has put a toxic on the proxy since its last
	// heal: only such a link's connections need dropping.
	toxic bool
	// addr and drop make a link between two servers of a Firewall; drop
	// cuts or restores one direction ("upstream" is peer to node).
	addr string
	drop func(direction string, on bool) error
}

// newLink's proxy listens on a port below the kernel's ephemeral range
// (linkPort), because Heal closes and reopens its listener on the same
// port: in the ephemeral range, a connection's source port or another
// process's probe for a free port could take it in between.
func newLink(srv *toxiproxy.ApiServer, peer, node, upstream string) (*Link, error) {
	var err error
	for range 20 {
		var port int
		var claim net.Listener
		if port, claim, err = linkPort(); err != nil {
			break
		}
		p := toxiproxy.NewProxy(srv, peer+"->"+node, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), upstream)
		if err = srv.Collection.Add(p, true); err == nil {
			return &Link{Peer: peer, Node: node, proxy: p, claim: claim}, nil
		}
		claim.Close()
		if errors.Is(err, toxiproxy.ErrProxyAlreadyExists) {
			break
		}
		// Taken between the probe and the proxy's bind: the proxy was not
		// added, so another port and the same name.
	}
	return nil, fmt.Errorf("cluster: proxy %s->%s: %w", peer, node, err)
}

// linkPorts is where links listen: ports neither a connect's source port
// nor a bind to port 0 is drawn from, from 10000 to the bottom of the
// kernel's ephemeral range (ip_local_port_range), or, where that range
// starts lower, above its top.
func linkPorts() (lo, hi int) {
	ephLo, ephHi := 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if f := strings.Fields(string(b)); err == nil && len(f) == 2 {
		l, err1 := strconv.Atoi(f[0])
		h, err2 := strconv.Atoi(f[1])
		if err1 == nil && err2 == nil && l <= h {
			ephLo, ephHi = l, h
		}
	}
	if ephLo-10000 >= 65535-ephHi {
		return 10000, max(ephLo, 10001)
	}
	return ephHi + 1, 65536
}

// linkRange is where links listen (linkPorts; a test narrows it).
var linkRange = linkPorts

// linkPort is a free port of linkRange, drawn at random, with its claim
// (claimPort, "locktorture-link.PORT"), which the link holds while it
// lives. Every process draws from the same range, and a heal closes its
// link's listener and reopens it on the same port: without the claim,
// another run's link (in this process or another) could draw the port in
// that moment and take it, and the healed link's clients would reconnect
// to that run's servers, a stranger's lock and its grants.
func linkPort() (int, net.Listener, error) {
	lo, hi := linkRange()
	for range 100 {
		port := lo + rand.IntN(hi-lo)
		claim, err := claimPort("link", port)
		if err != nil {
			continue // another link's, perhaps one being healed
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			l.Close()
			return port, claim, nil
		}
		claim.Close()
	}
	return 0, nil, fmt.Errorf("cluster: no free port from %d to %d for a link", lo, hi)
}

// Addr is the address a peer dials to reach the node through this link.
func (l *Link) Addr() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.proxy == nil {
		return l.addr
	}
	return l.proxy.Listen
}

// Cut drops everything in both directions, like a partition: connects still
// succeed (the proxy accepts) but no byte gets through, so callers see
// timeouts, not refusals. A command already sent may or may not reach Redis.
func (l *Link) Cut() error { return l.CutDirection("both") }

// CutDirection drops one direction of the link: "upstream" (peer to node:
// requests, a replica's acknowledgements), "downstream" (node to peer:
// replies, the replication stream) or "both". A one-way cut is how a
// write lands while its reply is lost. Between two servers of a Firewall
// it drops real packets one way, so TCP stalls both ways soon after (no
// acknowledgement comes back), as it does on a real network.
func (l *Link) CutDirection(direction string) error {
	dirs, err := linkDirections(direction)
	if err != nil {
		return fmt.Errorf("cluster: cut %s->%s: %w", l.Peer, l.Node, err)
	}
	for _, dir := range dirs {
		if l.drop != nil {
			err = l.drop(dir, true)
		} else {
			err = l.addToxic("cut-"+dir, "timeout", dir, `{"timeout":0}`)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func linkDirections(direction string) ([]string, error) {
	switch direction {
	case "upstream", "downstream":
		return []string{direction}, nil
	case "both":
		return []string{"upstream", "downstream"}, nil
	}
	return nil, fmt.Errorf("direction %q: want upstream, downstream or both", direction)
}

// SetLatency delays every chunk in both directions by latency ± jitter.
// A zero latency and jitter removes the delay.
func (l *Link) SetLatency(latency, jitter time.Duration) error {
	return l.SetLatencyDirection("both", latency, jitter)
}

// SetLatencyDirection is SetLatency on one direction: "upstream" (requests),
// "downstream" (replies) or "both".
func (l *Link) SetLatencyDirection(direction string, latency, jitter time.Duration) error {
	if l.drop != nil {
		if latency == 0 && jitter == 0 {
			return nil
		}
		return fmt.Errorf("cluster: latency on %s->%s: a link between two servers is the network itself, and this kernel has no netem (sch_netem) to delay it; delay client links, which go through toxiproxy", l.Peer, l.Node)
	}
	dirs, err := linkDirections(direction)
	if err != nil {
		return fmt.Errorf("cluster: latency on %s->%s: %w", l.Peer, l.Node, err)
	}
	for _, dir := range dirs {
		name := "latency-" + dir
		_ = l.proxy.Toxics.RemoveToxic(context.Background(), name)
		if latency == 0 && jitter == 0 {
			continue
		}
		attrs := fmt.Sprintf(`{"latency":%d,"jitter":%d}`, latency.Milliseconds(), jitter.Milliseconds())
		if err := l.addToxic(name, "latency", dir, attrs); err != nil {
			return err
		}
	}
	return nil
}

// Heal removes every toxic and drops the connections that lived through
// them: a blackhole discards bytes mid-stream, so such a connection would
// hand the next command a stranger's reply. A link no fault touched keeps
// its connections: a heal undoes faults, and its peer's connection to the
// store, say, was never part of one.
func (l *Link) Heal() error {
	if l.drop != nil {
		return errors.Join(l.drop("upstream", false), l.drop("downstream", false))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.toxic {
		return nil
	}
	l.proxy.Toxics.ResetToxics(context.Background())
	l.proxy.Stop()
	// The claim keeps every locktorture link off the port meanwhile; what
	// else binds it for a moment (a process that is not locktorture's
	// probing for a free port) is gone again at once.
	err := l.proxy.Start()
	for try := 1; try < 10 && err != nil; try++ {
		time.Sleep(5 * time.Millisecond)
		err = l.proxy.Start()
	}
	if err == nil {
		// Only a reopened link is healed: one that failed to reopen is
		// tried again by the next heal.
		l.toxic = false
		return nil
	}
	return fmt.Errorf("cluster: reopen link %s->%s on %s: %w", l.Peer, l.Node, l.proxy.Listen, err)
}

// addToxic holds mu while it marks the link and adds the toxic, so a heal
// at the same moment comes wholly before it (and the next heal removes
// the toxic) or wholly after it.
func (l *Link) addToxic(name, typ, stream, attrs string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.toxic = true
	body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, typ, stream, attrs)
	if _, err := l.proxy.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		if strings.Contains(err.Error(), "already exists") {
			return nil
		}
		return fmt.Errorf("cluster: toxic %s on %s->%s: %w", name, l.Peer, l.Node, err)
	}
	return nil
}

func (l *Link) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.proxy != nil {
		l.proxy.Stop()
	}
	if l.claim != nil {
		l.claim.Close()
	}
}

// linkDialer dials, for peer, the address a server named (a sentinel's
// master, a cluster's slot owner) through peer's own link to the node that
// address is in byAddr, and any other address (a sentinel's own) directly.
func linkDialer(peer string, byAddr map[string]*Node) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if n, ok := byAddr[addr]; ok {
			l, err := n.Link(peer)
			if err != nil {
				return nil, err
			}
			addr = l.Addr()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
}
