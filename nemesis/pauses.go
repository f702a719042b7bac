package nemesis

import (
	"context"
	"fmt"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// PauseClient stops client for d, whole: its connections freeze and it
// waits at every point it reaches, its lock's watchdog included.
func (g *Gate) PauseClient(client int, d time.Duration) {
	g.freeze(client, d)
	target, site := fmt.Sprintf("client %d", client), &history.Site{Client: history.IDOf(client)}
	_ = record(g.rec, fault.Pause, &history.Value{Target: target, Duration: int64(d), Site: site}, nil)
	time.AfterFunc(d, func() {
		_ = record(g.rec, fault.Resume, &history.Value{Target: target, Site: site}, nil)
	})
}

// Paused says whether client is paused now (a trap's pause, PauseClient).
func (g *Gate) Paused(client int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.clientLocked(client).paused()
}

// Outran notes that what, begun inside client's pause, did not end inside
// it (it ended after the pause, or the run's end cut it short): its story
// tells it inside the pause (a node filled while the holder is stopped),
// so the run did not happen as told and is starved, whatever the checkers
// find.
func (g *Gate) Outran(what string, client int) {
	_ = record(g.rec, fault.Starved, &history.Value{Target: fmt.Sprintf("%s began inside the pause of client %d and did not end inside it", what, client),
		Site: &history.Site{Client: history.IDOf(client)}}, nil)
}

// freeze pauses client for d: an OS process of its own is stopped; the
// connections of one in this process freeze, and their reads and writes
// already under way have their deadlines pushed back by d, so a frozen
// process's pending read does not time out (the others wait at their next
// Read or Write).
func (g *Gate) freeze(client int, d time.Duration) {
	g.mu.Lock()
	if c, until := g.clientLocked(client), time.Now().Add(d); until.After(c.pauseUntil) {
		c.pauseUntil = until
	}
	for _, p := range g.procs {
		if p.client == client {
			g.stopLocked(p)
		}
	}
	g.mu.Unlock()
	g.extendConns(client, d)
}

// extendConns pushes back by d the deadlines of client's reads and writes
// already inside a socket: a frozen process's pending read does not time
// out (the others wait at their next Read or Write).
func (g *Gate) extendConns(client int, d time.Duration) {
	g.mu.Lock()
	var mine []*frozenConn
	for _, p := range g.procs {
		if p.client == client {
			for c := range p.conns {
				mine = append(mine, c)
			}
		}
	}
	g.mu.Unlock()
	for _, c := range mine {
		c.extend(d)
	}
}

// waitThaw blocks while client is paused and returns how long it waited.
func (g *Gate) waitThaw(ctx context.Context, client int) time.Duration {
	start := time.Now()
	for {
		g.mu.Lock()
		rest := g.clientLocked(client).restOf()
		g.mu.Unlock()
		if rest <= 0 || !sleep(ctx, rest) {
			return time.Since(start)
		}
	}
}

// pauseFor is how long trap t pauses process now that Then has run: Pause,
// cut to end InLease before the process's lease, and recorded as starved
// where that leaves less than MinPause, or where Then ran past that point.
func (g *Gate) pauseFor(t Trap, process int, target string, site *history.Site) time.Duration {
	if t.InLease <= 0 {
		return t.Pause
	}
	deadline := g.rec.Deadline(process)
	if deadline == 0 {
		return t.Pause
	}
	left := time.Duration(deadline-g.rec.Now()) - t.InLease
	pause := max(0, min(t.Pause, left))
	if left < 0 && t.MinPause == 0 {
		_ = record(g.rec, fault.Starved, &history.Value{Target: fmt.Sprintf(
			"%s was %s past the point %s inside its lease where the story lets it go on, once the trap's actions were done",
			target, (-left).Round(time.Millisecond), t.InLease), Duration: int64(-left), Site: site}, nil)
	}
	if pause < t.MinPause {
		_ = record(g.rec, fault.Starved, &history.Value{Target: fmt.Sprintf(
			"the pause of %s could last only %s to end %s inside its lease, and the story needs %s",
			target, max(0, left).Round(time.Millisecond), t.InLease, t.MinPause), Duration: int64(t.MinPause - pause), Site: site}, nil)
	}
	return pause
}

// holdPast keeps client paused past its pause's end, or lets it go on at that
// end again (Trap.Outlast).
func (g *Gate) holdPast(client int, on bool) {
	g.mu.Lock()
	g.clientLocked(client).held = on
	g.mu.Unlock()
}

// outlast waits out a pause of process that began now, and, under
// Trap.Outlast, goes on past it while no write has been answered since
// written, up to Outlast and within the lease as pauseFor keeps the pause.
// The caller holds the client meanwhile. It returns how much longer than
// pause the pause was meant to last: to the write, or to the limit; what
// it lasted beyond that is the machine's lateness, which the lateness
// meter reads.
func (g *Gate) outlast(ctx context.Context, t Trap, process int, pause time.Duration, written int) time.Duration {
	end := g.rec.Now() + int64(pause)
	if !sleep(ctx, pause) || t.Outlast <= 0 {
		return 0
	}
	limit := end + int64(t.Outlast)
	if deadline := g.rec.Deadline(process); t.InLease > 0 && deadline != 0 {
		limit = min(limit, deadline-int64(t.InLease))
	}
	for {
		n, last := g.rec.Writes()
		switch {
		case n != written:
			return time.Duration(min(max(0, last-end), max(0, limit-end)))
		case g.rec.Now() >= limit:
			return time.Duration(max(0, limit-end))
		case !sleep(ctx, thawTick):
			return time.Duration(max(0, g.rec.Now()-end))
		}
	}
}

// sleep waits d, or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// workStep is the grain of Work: a pause that begins within a step is
// counted from that step's end, so a critical section's length is off by
// at most this much.
const workStep = 5 * time.Millisecond

// Work spends d of client's own working time, as the work in a critical
// section does: a pause of the client stops the work as it would stop a
// program's, so the work ends that much later (a GC pause inside a
// critical section lengthens it), where a plain sleep would run on
// through the pause and hide it.
func (g *Gate) Work(ctx context.Context, client int, d time.Duration) {
	for d > 0 && ctx.Err() == nil {
		g.waitThaw(ctx, client)
		step := min(d, workStep)
		if !sleep(ctx, step) {
			return
		}
		d -= step
	}
}
