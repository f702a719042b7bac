package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Follower is one loopback address for one peer whose every new connection
// goes, as it is accepted, to the peer's own link to whichever node target
// names then. A client process that dials one address follows a failover
// through it without knowing of one, as an application behind a
// failover-aware proxy or a DNS name that moves does: connections already
// open stay where they were and fail with their node, the next ones reach
// the new master. Every byte still crosses the peer's own link, so the
// faults a nemesis puts on that link reach the process.
type Follower struct {
	ln     net.Listener
	peer   string
	target func(context.Context) (*Node, error)

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
}

// Follow opens a Follower for peer; the cluster closes it on Close.
func (c *Cluster) Follow(peer string, target func(context.Context) (*Node, error)) (*Follower, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &Follower{ln: ln, peer: peer, target: target, conns: map[net.Conn]bool{}}
	c.mu.Lock()
	if c.isClosed {
		c.mu.Unlock()
		ln.Close()
		return nil, fmt.Errorf("cluster: follow for %s: cluster is closed", peer)
	}
	c.followers = append(c.followers, f)
	c.mu.Unlock()
	go f.serve()
	return f, nil
}

// Addr is where the peer dials.
func (f *Follower) Addr() string { return f.ln.Addr().String() }

// serve accepts until the follower is closed; a failed accept (out of
// file descriptors) is tried again, so later connections are not left
// queued on a listener nobody serves.
func (f *Follower) serve() {
	defer f.ln.Close()
	for {
		down, err := f.ln.Accept()
		if err != nil {
			f.mu.Lock()
			closed := f.closed
			f.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go f.forward(down)
	}
}

// forward joins one accepted connection to the peer's link to the node
// target names now; a target that cannot be reached closes it, as a
// refused connection would.
func (f *Follower) forward(down net.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var up net.Conn
	n, err := f.target(ctx)
	if err == nil {
		var l *Link
		if l, err = n.Link(f.peer); err == nil {
			var d net.Dialer
			up, err = d.DialContext(ctx, "tcp", l.Addr())
		}
	}
	if err != nil || !f.track(down, up) {
		down.Close()
		if up != nil {
			up.Close()
		}
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
	}
	go pipe(up, down)
	go pipe(down, up)
	wg.Wait()
	f.untrack(down, up)
}

func (f *Follower) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	for _, c := range cs {
		f.conns[c] = true
	}
	return true
}

func (f *Follower) untrack(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		delete(f.conns, c)
	}
}

// close stops accepting and closes every connection it joined.
func (f *Follower) close() {
	f.mu.Lock()
	f.closed = true
	conns := f.conns
	f.conns = map[net.Conn]bool{}
	f.mu.Unlock()
	f.ln.Close()
	for c := range conns {
		c.Close()
	}
}
