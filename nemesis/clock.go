package nemesis

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// BumpClock sets node's clock to the machine's plus offset (libfaketime):
// Redis's key expiry follows it, so a forward bump past a key's TTL expires
// it at once on that node alone, and a backward bump extends it.
func (n *Nemesis) BumpClock(node string, offset time.Duration) error {
	v := &history.Value{Target: node, Duration: int64(offset), Site: &history.Site{Node: node}}
	return record(n.rec, fault.ClockBump, v, func() error {
		nd, err := n.node(node)
		if err != nil {
			return err
		}
		return nd.SetClockOffset(offset)
	})
}

// StrobeClock flips node's clock between +delta and its offset before, every
// period, until dur has passed or ctx ends, then leaves the old offset in
// place (Jepsen's strobe).
func (n *Nemesis) StrobeClock(ctx context.Context, node string, delta, period, dur time.Duration) error {
	nd, err := n.node(node)
	if err != nil {
		return err
	}
	base := nd.ClockOffset()
	target := fmt.Sprintf("%s ±%s every %s", node, delta, period)
	v := &history.Value{Target: target, Duration: int64(dur), Site: &history.Site{Node: node}}
	if err := record(n.rec, fault.ClockStrobeStart, v, nil); err != nil {
		return err
	}
	t := time.NewTicker(period)
	defer t.Stop()
	end := time.After(dur)
	up := false
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-end:
			done = true
		case <-t.C:
			up = !up
			off := base
			if up {
				off += delta
			}
			// Each flip is a bump of its own in the history, so the clock
			// chart shows the strobe as it was.
			if err := n.BumpClock(node, off); err != nil {
				return err
			}
		}
	}
	if err := n.BumpClock(node, base); err != nil {
		return err
	}
	return record(n.rec, fault.ClockStrobeEnd, &history.Value{Target: node, Site: &history.Site{Node: node}}, nil)
}

// ResetClocks puts every faked node clock back to the machine's.
func (n *Nemesis) ResetClocks() error {
	return record(n.rec, fault.ClockReset, &history.Value{Target: "all nodes", Site: &history.Site{All: true}}, func() error {
		for _, nd := range n.cl.Nodes() {
			if nd.ClockOffset() != 0 {
				if err := nd.SetClockOffset(0); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// ClientClock is a client's own wall clock, skewable by the nemesis. Locks
// that read a wall clock (GETSET expiry, RedLock elapsed time, fair-lock
// timeouts) read this one (it is a locks.Clock).
type ClientClock struct {
	// Name is the client it belongs to, for the history.
	Name   string
	offset atomic.Int64
}

// Now is the machine's time plus the skew.
func (c *ClientClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// Offset is the current skew.
func (c *ClientClock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// SkewClient sets client clock c to the machine's plus offset.
func (n *Nemesis) SkewClient(c *ClientClock, offset time.Duration) error {
	v := &history.Value{Target: c.Name, Duration: int64(offset), Site: &history.Site{Peer: c.Name}}
	return record(n.rec, fault.ClockSkew, v, func() error {
		c.offset.Store(int64(offset))
		return nil
	})
}
