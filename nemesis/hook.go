package nemesis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/history"
)

// Hook returns the go-redis hook for one process of client; the harness
// adds it to every Redis client it hands that process. Through it:
//
//   - every connection the client dials is the gate's: while the client is
//     paused nothing is written and no reply is handed up (pub/sub and
//     pipelines included), and the connection's deadlines move on by the
//     pause, as a frozen process's timers do; when the process is killed,
//     its connections close and no new one opens;
//   - with traps, every command boundary (before a command is written,
//     after its reply arrived and before the caller sees it) is a place
//     where armed command traps spring.
//
// traps is false for connections that are not the lock's (the protected
// store's): they freeze and die with the client, but no trap selects them.
func (g *Gate) Hook(client, process int, traps bool) redis.Hook {
	g.hooking(client, process)
	return &hook{g: g, client: client, process: process, traps: traps}
}

// hooking notes process as client's newest: hooks are made as a process
// opens its connections.
func (g *Gate) hooking(client, process int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.clientLocked(client)
	c.newest, c.hooked = process, true
}

// HookCluster hooks a cluster client as Hook does a plain one: each of its
// commands meets the gate once, whichever node it is routed or redirected
// to, and every connection it dials to any node is the gate's.
func (g *Gate) HookCluster(c *redis.ClusterClient, client, process int, traps bool) {
	g.hooking(client, process)
	h := &hook{g: g, client: client, process: process, traps: traps}
	c.AddHook(h)
	c.OnNewNode(func(n *redis.Client) { n.AddHook(dialOnly{h}) })
}

// dialOnly is a hook's dial half, for a cluster's node clients: their
// commands already met the gate at the cluster client.
type dialOnly struct{ *hook }

func (dialOnly) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (dialOnly) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

type hook struct {
	g       *Gate
	client  int
	process int
	traps   bool
}

func (h *hook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if h.g.Dead(h.process) {
			return nil, ErrCrashed
		}
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		fc := &frozenConn{Conn: c, g: h.g, client: h.client, process: h.process}
		h.g.mu.Lock()
		p := h.g.procLocked(h.client, h.process)
		if !p.dead {
			if p.conns == nil {
				p.conns = map[*frozenConn]bool{}
			}
			p.conns[fc] = true
		}
		dead := p.dead
		h.g.mu.Unlock()
		if dead {
			_ = c.Close()
			return nil, ErrCrashed
		}
		return fc, nil
	}
}

func (h *hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.around(ctx, []redis.Cmder{cmd}, func(ctx context.Context) error { return next(ctx, cmd) })
	}
}

func (h *hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return h.around(ctx, cmds, func(ctx context.Context) error { return next(ctx, cmds) })
	}
}

// around runs send for cmds with the gate standing before they are written
// and after their replies arrived.
func (h *hook) around(ctx context.Context, cmds []redis.Cmder, send func(context.Context) error) error {
	if h.g.Dead(h.process) {
		return crashed(cmds)
	}
	if !h.traps {
		return send(ctx)
	}
	args := make([][]string, len(cmds))
	for i, c := range cmds {
		args[i] = Args(c)
	}
	id := h.g.traceSend(h.client, h.process, args)
	at := h.g.Sending(h.client, h.process, args)
	for i := range cmds {
		if err := h.g.Boundary(ctx, h.client, h.process, at[i], false, false); err != nil {
			return crashed(cmds) // never written: unanswered in the trace
		}
	}
	err := send(ctx)
	h.g.traceReply(id, cmds, err)
	for i, cmd := range cmds {
		if err := h.g.Boundary(ctx, h.client, h.process, at[i], true, Succeeded(cmd)); err != nil {
			return crashed(cmds)
		}
	}
	// A caller that gave up as the reply came (a Cancel trap) hears its
	// context's error, whatever the command did or answered. Only that
	// cancellation: a reply that outlived a deadline of the lock's own (a
	// paused client's, K6) is still handed up, as go-redis read it.
	if cerr := ctx.Err(); cerr != nil && errors.Is(context.Cause(ctx), errGaveUp) {
		for _, cmd := range cmds {
			cmd.SetErr(cerr)
		}
		return cerr
	}
	return err
}

// Args is a command's name and arguments as text, as a worker reports them
// and command traps match them.
func Args(cmd redis.Cmder) []string {
	raw := cmd.Args()
	args := make([]string, len(raw))
	for i, a := range raw {
		args[i] = fmt.Sprint(a)
	}
	return args
}

func crashed(cmds []redis.Cmder) error {
	for _, c := range cmds {
		c.SetErr(ErrCrashed)
	}
	return ErrCrashed
}

// Sending notes cmds (each a command's name and arguments) as about to be
// written by process of client in its current op, and returns the place of
// each among the op's commands, for Boundary; -1 for a command of a process
// that is no longer the client's current one (a retired process's
// goroutine), which no trap selects. The hook calls it for connections in
// this process; a worker reports its commands through the harness.
func (g *Gate) Sending(client, process int, cmds [][]string) []int {
	return g.sending(client, process, cmds, false)
}

// SendingApart is Sending for commands a worker's thread other than the
// one serving the client's op sent (a library's heartbeat): they are not
// the op's, so a trap that names an op neither selects nor counts them,
// and only one that names none (a renewal's) can spring on them. Go
// locks cannot tell their own goroutines apart this way: every command
// of theirs is the op's.
func (g *Gate) SendingApart(client, process int, cmds [][]string) []int {
	return g.sending(client, process, cmds, true)
}

func (g *Gate) sending(client, process int, cmds [][]string, apart bool) []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.clientLocked(client)
	if c.op == nil {
		c.op = &currentOp{process: process}
	}
	s := c.op
	at := make([]int, len(cmds))
	for i, c := range cmds {
		at[i] = -1
		if s.process == process {
			at[i] = len(s.cmds)
			c := newSent(c)
			c.apart = apart
			s.cmds = append(s.cmds, c)
		}
	}
	return at
}

// Boundary springs the first armed command trap that selects the command at
// place i (from Sending) of client's op: before it is written, or, with
// reply, after its reply arrived, which succeeded or not (Succeeded). It
// returns ErrCrashed when the trap killed the process: the command must not
// go out, or its reply must not be seen.
func (g *Gate) Boundary(ctx context.Context, client, process, i int, reply, succeeded bool) error {
	// The reply is noted and the traps judged under one lock, on the op's
	// commands as they stand: this runs twice for every command a lock
	// sends, and the commands of the op's other goroutines (RedLock's
	// nodes) change them meanwhile.
	g.mu.Lock()
	var s *currentOp
	if c := g.clients[client]; c != nil {
		s = c.op
	}
	if s == nil || s.process != process || i < 0 || i >= len(s.cmds) {
		g.mu.Unlock()
		return nil
	}
	if reply {
		s.cmds[i].replied, s.cmds[i].succeeded = true, succeeded
	}
	t, ok := g.takeLocked(client, func(t Trap) bool {
		c := t.Command
		return c != nil && c.Reply == reply && c.selects(s.f, s.cmds, i) && (!c.Succeeded || succeeded)
	})
	name, in := s.cmds[i].args[0], s.f
	g.mu.Unlock()
	if !ok {
		return nil
	}
	// The command's own deadline (RedLock gives each node a few ms) must
	// not cut the pause short: a frozen process does not watch its clocks.
	return g.spring(context.WithoutCancel(ctx), t, client, process, t.Command.String()+" ("+name+")",
		history.Site{Command: name, Reply: reply, In: in}, false)
}

// frozenConn is a client's connection as the gate lets it run: nothing
// passes while the client is paused, and the deadlines go on by the time
// it was paused, so a pause looks to the client as it would to a frozen
// process: nothing happened meanwhile, its replies are simply late.
type frozenConn struct {
	net.Conn
	g       *Gate
	client  int
	process int

	mu            sync.Mutex
	read, written time.Time
	// reading and writing are true while a Read or Write is inside the
	// socket, where a pause that starts cannot stop it.
	reading, writing bool
}

func (c *frozenConn) Read(p []byte) (int, error) {
	c.thaw(true)
	c.busy(&c.reading, true)
	n, err := c.Conn.Read(p)
	c.busy(&c.reading, false)
	c.thaw(true)
	return n, err
}

func (c *frozenConn) Write(p []byte) (int, error) {
	c.thaw(false)
	c.busy(&c.writing, true)
	defer c.busy(&c.writing, false)
	return c.Conn.Write(p)
}

func (c *frozenConn) busy(flag *bool, on bool) {
	c.mu.Lock()
	*flag = on
	c.mu.Unlock()
}

// Close closes the connection and takes it off the gate's books, so a
// process its client closed (retired, or done at the end of a run) leaves
// nothing for later pauses to walk through.
func (c *frozenConn) Close() error {
	c.g.mu.Lock()
	if p := c.g.procs[c.process]; p != nil {
		delete(p.conns, c)
		c.g.forgetLocked(c.process)
	}
	c.g.mu.Unlock()
	return c.Conn.Close()
}

// extend pushes back the deadline of a Read or Write already inside the
// socket when a pause of d begins.
func (c *frozenConn) extend(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reading && !c.read.IsZero() {
		c.read = c.read.Add(d)
		_ = c.Conn.SetReadDeadline(c.read)
	}
	if c.writing && !c.written.IsZero() {
		c.written = c.written.Add(d)
		_ = c.Conn.SetWriteDeadline(c.written)
	}
}

// thaw waits out a pause and pushes the read (or write) deadline back by
// it.
func (c *frozenConn) thaw(read bool) {
	waited := c.g.waitThaw(context.Background(), c.client)
	if waited <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case read && !c.read.IsZero():
		c.read = c.read.Add(waited)
		_ = c.Conn.SetReadDeadline(c.read)
	case !read && !c.written.IsZero():
		c.written = c.written.Add(waited)
		_ = c.Conn.SetWriteDeadline(c.written)
	}
}

func (c *frozenConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.read, c.written = t, t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *frozenConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.read = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *frozenConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.written = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

// SyscallConn hands go-redis the socket for its health check (a peek for
// a connection the far end closed), which it skips for connections that
// do not offer one and would then reuse dead ones.
func (c *frozenConn) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(syscall.Conn).SyscallConn()
}
