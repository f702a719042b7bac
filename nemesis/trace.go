package nemesis

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// The gate keeps, for the run, when the lock issued each command of its
// connections in this process and when go-redis had its reply (Trace): a
// verdict the lateness meter does not explain can hang on one command's
// timing (a watchdog's renewal issued or answered too late to keep the
// key, a waiter's SET on a promoted replica), which neither the history
// (ops, not commands) nor a server's log holds. The engine writes it out
// for a run that did not match its expectation. A worker process's
// commands are not in it: the harness hears of them, but not when they
// reached the wire.

// Traced is one command of a lock's connection.
type Traced struct {
	// Issued is when the lock issued the command, before the gate's traps
	// at its boundary and go-redis's wait for a connection, and Answered
	// when go-redis had read its reply or failed, before a trap at the
	// reply (0: never, the process was killed before it was written, or
	// the run ended first), in the run's harness ns, as the history's:
	// what lies between, a pause the history records included, is the
	// command's whole wait.
	Issued, Answered int64
	Client, Process  int
	// Op is what the process was doing as it issued the command
	// (history.Acquire, history.Release, Renewal, "setup", "retired":
	// Gate.opOf).
	Op string
	// Command is its shape, as the profile names it ("SET NX",
	// "EVALSHA <digest>"), and Key its key.
	Command, Key string
	// Reply is the reply's value or error, shortened.
	Reply string
}

// traceMax bounds the commands kept: the latest, since a verdict is made
// at the story's end, and a run of an hour sends millions.
const traceMax = 1 << 16

// trace is the gate's record of commands. Its lock is its own: every
// command takes it twice, beside the gate's.
type trace struct {
	mu sync.Mutex
	// cmds holds the commands from the base-th on; dropped counts those
	// let go to keep traceMax.
	cmds          []Traced
	base, dropped int
}

// traceSend notes cmds as issued by process of client now, and returns
// the id of the first.
func (g *Gate) traceSend(client, process int, cmds [][]string) int {
	op := g.opOf(client, process)
	t := &g.trace
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.cmds)+len(cmds) > 2*traceMax {
		n := min(len(t.cmds), max(0, len(t.cmds)+len(cmds)-traceMax))
		t.cmds = append(t.cmds[:0], t.cmds[n:]...)
		t.base, t.dropped = t.base+n, t.dropped+n
	}
	id := t.base + len(t.cmds)
	now := g.rec.Now()
	for _, raw := range cmds {
		s := newSent(raw)
		c := Traced{Issued: now, Client: client, Process: process, Op: op, Command: s.shape()}
		if len(s.args) > 0 && !setUp[s.args[0]] {
			// As the lock spelled it, not as a trap matches it.
			c.Key = commandKey(append([]string{s.args[0]}, raw[1:]...))
		}
		t.cmds = append(t.cmds, c)
	}
	return id
}

// traceReply notes the replies of the commands traceSend numbered from id;
// err is what sending them returned, which go-redis sets on a lone
// command only once the hooks have returned.
func (g *Gate) traceReply(id int, cmds []redis.Cmder, err error) {
	now := g.rec.Now()
	t := &g.trace
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, cmd := range cmds {
		if j := id + i - t.base; j >= 0 && j < len(t.cmds) {
			t.cmds[j].Answered, t.cmds[j].Reply = now, replyText(cmd, err)
		}
	}
}

// opOf names what process of client is doing, for the trace: its lock op,
// Renewal after an op of its ended and before its next (a command a
// watchdog sends during an op carries the op's name), "setup" before its
// first, and "retired" once the client has a newer process.
func (g *Gate) opOf(client, process int) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.clientLocked(client)
	switch {
	case c.hooked && c.newest != process:
		return "retired"
	case c.op == nil || c.op.process != process:
		return "setup"
	case c.op.f == "":
		return Renewal
	}
	return c.op.f
}

// replyText is cmd's reply as a trace shows it: its error (or the
// send's), or its value cut to 40 bytes.
func replyText(cmd redis.Cmder, sendErr error) string {
	if err := cmd.Err(); err != nil {
		return "error: " + err.Error()
	}
	if sendErr != nil {
		return "error: " + sendErr.Error()
	}
	var v any
	switch c := cmd.(type) {
	case *redis.Cmd:
		v = c.Val()
	case *redis.StatusCmd:
		v = c.Val()
	case *redis.IntCmd:
		v = c.Val()
	case *redis.BoolCmd:
		v = c.Val()
	case *redis.StringCmd:
		v = c.Val()
	default:
		return "ok"
	}
	s := fmt.Sprint(v)
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return s
}

// Trace is the commands kept, oldest first, and how many older ones were
// let go.
func (g *Gate) Trace() (cmds []Traced, dropped int) {
	t := &g.trace
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Traced(nil), t.cmds...), t.dropped
}

// WriteTrace writes a trace (Gate.Trace's) as tab-separated lines under a
// header, the times in seconds from the run's start, as a report shows the
// history's.
func WriteTrace(w io.Writer, cmds []Traced, dropped int) error {
	b := bufio.NewWriter(w)
	if dropped > 0 {
		fmt.Fprintf(b, "# the first %d commands were let go; the last %d follow\n", dropped, len(cmds))
	}
	fmt.Fprintln(b, "issued\tanswered\ttook_ms\tclient\tprocess\top\tcommand\tkey\treply")
	for _, c := range cmds {
		answered, took := "-", "-"
		if c.Answered != 0 {
			answered, took = seconds(c.Answered), fmt.Sprintf("%.1f", float64(c.Answered-c.Issued)/1e6)
		}
		fmt.Fprintf(b, "%s\t%s\t%s\tc%d\t%d\t%s\t%s\t%s\t%s\n", seconds(c.Issued), answered, took, c.Client, c.Process, c.Op,
			c.Command, c.Key, oneField.Replace(c.Reply))
	}
	return b.Flush()
}

// oneField keeps a reply to its own field and line.
var oneField = strings.NewReplacer("\t", " ", "\n", " ")

// seconds shows harness ns as seconds to the microsecond.
func seconds(ns int64) string { return fmt.Sprintf("%.6f", float64(ns)/1e9) }
