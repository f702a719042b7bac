package nemesis_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/nemesis"
)

// hooked is a client of process of client, on n1, with the gate's hook.
func (e *env) hooked(g *nemesis.Gate, client, process int, timeout time.Duration) *redis.Client {
	e.t.Helper()
	c := cluster.NewClient(e.cl.Node("n1").Addr(), cluster.ClientOptions{Timeout: timeout})
	c.AddHook(g.Hook(client, process, true))
	e.t.Cleanup(func() { c.Close() })
	return c
}

// A whole-client pause freezes every connection of that client: a command
// sent meanwhile is answered late, not timed out (its deadline moves on with
// the pause, as a frozen process's would), pub/sub messages wait, and other
// clients go on.
func TestPausedClientFreezesItsConnections(t *testing.T) {
	e := newEnv(t, names("n1")...)
	g := nemesis.NewGate(e.rec)
	c0 := e.hooked(g, 0, 0, time.Second)
	c1 := e.hooked(g, 1, 1, time.Second)
	sub := c0.Subscribe(ctx, "ch")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := sub.Channel()

	// The clock starts before the pause, whose 1.5 s count from its call;
	// the other client has a second of it to answer, beside whatever else
	// the machine runs.
	start := time.Now()
	g.PauseClient(0, 1500*time.Millisecond)
	if err := c1.Set(ctx, "other", 1, 0).Err(); err != nil || time.Since(start) > 1200*time.Millisecond {
		t.Fatalf("another client must go on: %v after %v", err, time.Since(start))
	}
	if err := c1.Publish(ctx, "ch", "hello").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c0.Set(ctx, "k", 1, 0).Err(); err != nil {
		t.Fatalf("a paused client's command must be late, not failed (its 1 s timeout moves with the pause): %v", err)
	}
	if took := time.Since(start); took < 1450*time.Millisecond {
		t.Fatalf("a paused client's command went through after %v", took)
	}
	select {
	case m := <-msgs:
		if took := time.Since(start); took < 1450*time.Millisecond {
			t.Fatalf("a paused client's pub/sub message arrived after %v", took)
		}
		if m.Payload != "hello" {
			t.Fatalf("message %q", m.Payload)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the message never arrived after the pause")
	}
}

// Command traps select by op, command, position, the command before, and
// the reply, with no call from the code that sends the commands.
func TestCommandTrapsSelect(t *testing.T) {
	e := newEnv(t, names("n1")...)
	g := nemesis.NewGate(e.rec)
	c := e.hooked(g, 0, 0, time.Second)
	var seen []string
	mark := func(what string) func(context.Context, int, int) error {
		return func(context.Context, int, int) error { seen = append(seen, what); return nil }
	}
	// The DEL of a GET-then-DEL release, and not a lone DEL.
	g.Arm(nemesis.Trap{Client: 0, Command: &nemesis.Command{In: history.Release, Match: "DEL", After: "GET"}, Then: mark("get-del")})
	// The reply of the second SET NX of an acquire, only when it took the key.
	g.Arm(nemesis.Trap{Client: 0, Command: &nemesis.Command{In: history.Acquire, Match: "SET NX", Nth: 2, Reply: true, Succeeded: true}, Then: mark("second-set-nx")})

	g.Begin(context.Background(), 0, 0, history.Release)
	c.Del(ctx, "a")
	g.End(0, 0)
	g.Begin(context.Background(), 0, 0, history.Acquire)
	c.SetNX(ctx, "b", 1, time.Second) // first SET NX
	c.Set(ctx, "c", 1, 0)             // a SET without NX does not count
	c.SetNX(ctx, "b", 1, time.Second) // second, refused: the key is there
	g.End(0, 0)
	if len(seen) != 0 {
		t.Fatalf("traps sprang where they must not: %v", seen)
	}
	g.Begin(context.Background(), 0, 0, history.Acquire)
	c.SetNX(ctx, "d", 1, time.Second)
	c.SetNX(ctx, "e", 1, time.Second) // second, and it takes the key
	g.End(0, 0)
	g.Begin(context.Background(), 0, 0, history.Release)
	c.Get(ctx, "e")
	c.Del(ctx, "e")
	g.End(0, 0)
	if strings.Join(seen, ",") != "second-set-nx,get-del" {
		t.Fatalf("traps sprang at %v", seen)
	}
}

// A trap on any command springs on the lock's own, not on the HELLO of a
// connection its client dials inside the op.
func TestAnyCommandTrapSkipsConnectionSetUp(t *testing.T) {
	e := newEnv(t, names("n1")...)
	g := nemesis.NewGate(e.rec)
	c := e.hooked(g, 0, 0, time.Second) // no connection yet
	var seen []string
	g.Arm(nemesis.Trap{Client: 0, Command: &nemesis.Command{In: history.Release, Reply: true, Succeeded: true},
		Then: func(context.Context, int, int) error { seen = append(seen, "release"); return nil }})

	g.Begin(context.Background(), 0, 0, history.Release)
	c.Del(ctx, "absent") // the pool dials first: HELLO succeeds, this DEL does not
	g.End(0, 0)
	if len(seen) != 0 {
		t.Fatalf("the trap sprang on the connection's set-up: %v", seen)
	}
	c.Set(ctx, "a", 1, 0)
	g.Begin(context.Background(), 0, 0, history.Release)
	c.Del(ctx, "a")
	g.End(0, 0)
	if len(seen) != 1 {
		t.Fatalf("the trap did not spring on the release's DEL: %v", seen)
	}
}

// LikeFirst springs on the op's first try to take a key and its retries,
// not on a later step of a try that took it: Symfony's acquire takes the
// key with one script and sets its lease with another.
func TestLikeFirstSkipsTheStepAfterATake(t *testing.T) {
	e := newEnv(t, names("n1")...)
	g := nemesis.NewGate(e.rec)
	c := e.hooked(g, 0, 0, time.Second)
	var seen []string
	g.Arm(nemesis.Trap{Client: 0, Command: &nemesis.Command{In: history.Acquire, Match: "EVAL|EVALSHA", LikeFirst: true},
		Then: func(context.Context, int, int) error { seen = append(seen, "take"); return nil }})
	take := `return redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", 300000)`
	lease := `return redis.call("PEXPIRE", KEYS[1], ARGV[1])`
	c.Set(ctx, "held", 1, 0)

	g.Begin(context.Background(), 0, 0, history.Acquire)
	c.Eval(ctx, take, []string{"held"}, "me") // the first try, refused: a trap springs once
	c.Eval(ctx, take, []string{"k"}, "me")
	c.Eval(ctx, lease, []string{"k"}, 1000)
	g.End(0, 0)
	if strings.Join(seen, ",") != "take" {
		t.Fatalf("want a spring at the op's first try, got %v", seen)
	}
	seen = nil
	g.Disarm()
	g.Arm(nemesis.Trap{Client: 0, Command: &nemesis.Command{In: history.Acquire, Match: "EVAL|EVALSHA", LikeFirst: true, Nth: 3},
		Then: func(context.Context, int, int) error { seen = append(seen, "third"); return nil }})
	g.Begin(context.Background(), 0, 0, history.Acquire)
	c.Eval(ctx, take, []string{"held"}, "me") // refused: the key is held
	c.Eval(ctx, take, []string{"m"}, "me")    // the retry takes another
	c.Eval(ctx, lease, []string{"m"}, 1000)   // the third EVAL, but the lease step
	g.End(0, 0)
	if len(seen) != 0 {
		t.Fatalf("sprang on the step after a take: %v", seen)
	}
	g.Begin(context.Background(), 0, 0, history.Acquire)
	c.Eval(ctx, take, []string{"held"}, "me")
	c.Eval(ctx, take, []string{"held"}, "me")
	c.Eval(ctx, take, []string{"j"}, "me") // the third, a retry of the first
	g.End(0, 0)
	if strings.Join(seen, ",") != "third" {
		t.Fatalf("want one spring at the third try, got %v", seen)
	}
	// go-redis runs a script the server does not know yet as an EVALSHA,
	// refused (NOSCRIPT), then its EVAL: the same try.
	seen = nil
	g.Arm(nemesis.Trap{Client: 0, Command: &nemesis.Command{In: history.Acquire, Match: "EVAL|EVALSHA", LikeFirst: true, Nth: 2},
		Then: func(context.Context, int, int) error { seen = append(seen, "eval"); return nil }})
	unknown := redis.NewScript(`return redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", 1000)`)
	g.Begin(context.Background(), 0, 0, history.Acquire)
	unknown.Run(ctx, c, []string{"n"}, "me")
	g.End(0, 0)
	if strings.Join(seen, ",") != "eval" {
		t.Fatalf("want a spring at the EVAL after the NOSCRIPT EVALSHA, got %v", seen)
	}
}

// Every springs on the reply that completes a row of successes, as a
// RedLock client hears OK from every node: not on a try that lost a node,
// whatever the count of sends, and only once the whole row has replied.
func TestEveryTrapSpringsOnceEveryReplySucceeded(t *testing.T) {
	e := newEnv(t, names("n1")...)
	g := nemesis.NewGate(e.rec)
	c := e.hooked(g, 0, 0, time.Second)
	var seen []string
	g.Arm(nemesis.Trap{Client: 0, Command: &nemesis.Command{In: history.Acquire, Match: "SET NX", Every: 3, Reply: true},
		Then: func(context.Context, int, int) error { seen = append(seen, "every"); return nil }})
	c.Set(ctx, "taken", 1, 0)

	g.Begin(context.Background(), 0, 0, history.Acquire)
	c.SetNX(ctx, "a", 1, time.Second)
	c.SetNX(ctx, "taken", 1, time.Second) // refused: this try lost a node
	c.SetNX(ctx, "b", 1, time.Second)     // the third send, but not three successes
	c.Del(ctx, "a", "b")                  // the try gives up: a new row starts
	c.SetNX(ctx, "x", 1, time.Second)
	c.SetNX(ctx, "y", 1, time.Second)
	if len(seen) != 0 {
		t.Fatalf("sprang before a row of three successes: %v", seen)
	}
	c.SetNX(ctx, "z", 1, time.Second)
	g.End(0, 0)
	if strings.Join(seen, ",") != "every" {
		t.Fatalf("want one spring at the third success in a row, got %v", seen)
	}
}

// A crash at a command kills the process: the command never leaves, its
// connections close, no new one opens; the client's next process is alive.
func TestCommandTrapCrashKillsTheProcess(t *testing.T) {
	e := newEnv(t, names("n1")...)
	g := nemesis.NewGate(e.rec)
	c := e.hooked(g, 0, 7, time.Second)
	g.Arm(nemesis.Trap{Client: nemesis.AnyClient, Command: &nemesis.Command{Match: "PEXPIRE"}, Crash: true})
	if err := c.Set(ctx, "k", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.PExpire(ctx, "k", time.Second).Err(); !errors.Is(err, nemesis.ErrCrashed) {
		t.Fatalf("the trapped command: %v", err)
	}
	if ttl := e.direct("n1").PTTL(ctx, "k").Val(); ttl != -1 {
		t.Fatalf("the PEXPIRE of a process that died before sending it reached Redis: PTTL %v", ttl)
	}
	if !g.Dead(7) {
		t.Fatal("the gate does not know process 7 died")
	}
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, nemesis.ErrCrashed) {
		t.Fatalf("a dead process sent a command: %v", err)
	}
	next := e.hooked(g, 0, 8, time.Second)
	if err := next.Get(ctx, "k").Err(); err != nil {
		t.Fatalf("the client's next process: %v", err)
	}
}

// CrashWaiter kills a client that has been inside an acquire for a while,
// whatever its lock is doing meanwhile, and leaves the others alone.
func TestCrashWaiterKillsAClientWaitingInAcquire(t *testing.T) {
	rec := history.NewRecorder(nil, 0)
	g := nemesis.NewGate(rec)
	g.Begin(context.Background(), 0, 10, history.Release)
	// The wait counts from Begin, so the clock starts before it: started
	// after, a test descheduled between the two saw a fair kill as early.
	begun := time.Now()
	g.Begin(context.Background(), 1, 11, history.Acquire)
	step := g.CrashWaiter(0, 50*time.Millisecond)
	if err := step.Do(ctx); err != nil {
		t.Fatal(err)
	}
	if time.Since(begun) < 50*time.Millisecond {
		t.Fatal("killed a client that had not waited yet")
	}
	if g.Dead(10) || !g.Dead(11) {
		t.Fatalf("dead: releasing process %v, waiting process %v", g.Dead(10), g.Dead(11))
	}
	if !g.End(1, 11) {
		t.Fatal("End must report that the process died during its op")
	}
}

// WhenAcquiring waits for its client to be inside an acquire, not in
// another op and not another client's acquire.
func TestWhenAcquiringWaitsForTheClientsAcquire(t *testing.T) {
	g := nemesis.NewGate(history.NewRecorder(nil, 0))
	g.Begin(context.Background(), 0, 10, history.Release)
	g.Begin(context.Background(), 1, 11, history.Acquire)
	var did atomic.Bool
	step := g.WhenAcquiring(0, 0, "act", func(context.Context) error { did.Store(true); return nil })
	done := make(chan error, 1)
	go func() { done <- step.Do(ctx) }()
	time.Sleep(50 * time.Millisecond)
	if did.Load() {
		t.Fatal("ran while the client was releasing")
	}
	g.End(0, 10)
	g.Begin(context.Background(), 0, 10, history.Acquire)
	if err := <-done; err != nil || !did.Load() {
		t.Fatalf("once the client acquires: err %v, ran %v", err, did.Load())
	}
}

// A pause sprung at a command lasts its whole length even when the command
// carries a short deadline of its own (RedLock's per-node timeout).
func TestCommandPauseOutlivesTheCommandsDeadline(t *testing.T) {
	e := newEnv(t, names("n1")...)
	g := nemesis.NewGate(e.rec)
	c := e.hooked(g, 0, 0, time.Second)
	g.Arm(nemesis.Trap{Client: 0, Command: &nemesis.Command{Match: "SET NX", Reply: true}, Pause: 300 * time.Millisecond})
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	ok, err := c.SetNX(cctx, "k", 1, time.Second).Result()
	if took := time.Since(start); took < 280*time.Millisecond {
		t.Fatalf("the pause ended with the command's 20 ms deadline, after %v", took)
	}
	if err != nil || !ok {
		t.Fatalf("the reply held back by the pause must still reach the caller: %v %v", ok, err)
	}
}

// A pause that begins while a reply is still on its way: the read already
// waiting in the socket does not time out during the pause (a frozen
// process's timers do not fire), so a reply that comes later than the
// command's own timeout, but within the pause, is read after it.
func TestPauseStopsTheClockOfAReadUnderWay(t *testing.T) {
	e := newEnv(t, names("n1")...)
	g := nemesis.NewGate(e.rec)
	l, err := e.cl.Node("n1").Link("c0")
	if err != nil {
		t.Fatal(err)
	}
	var cs []*redis.Client
	for p := 0; p < 2; p++ {
		c := cluster.NewClient(l.Addr(), cluster.ClientOptions{Timeout: 400 * time.Millisecond, PoolSize: 1})
		c.AddHook(g.Hook(0, p, true))
		defer c.Close()
		if err := c.Ping(ctx).Err(); err != nil { // dial before the latency
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	// The pause begins 30 ms into a read whose reply takes 600 ms against
	// a 400 ms timeout: 370 ms of room for a busy machine's scheduler.
	if err := l.SetLatencyDirection("downstream", 600*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	if err := cs[0].Get(ctx, "k").Err(); err == nil || errors.Is(err, redis.Nil) {
		t.Fatalf("the setup is wrong: with 600 ms of latency a 400 ms timeout must expire, got %v", err)
	}
	go func() {
		time.Sleep(30 * time.Millisecond)
		g.PauseClient(0, time.Second)
	}()
	start := time.Now()
	if err := cs[1].Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("the read under way timed out during the pause: %v after %v", err, time.Since(start))
	}
	if took := time.Since(start); took < time.Second {
		t.Fatalf("the reply reached the paused client after %v", took)
	}
}

// A command of a retired process (its watchdog, still running) neither
// springs a trap nor disturbs what the gate knows of the client's current
// process.
func TestStaleProcessLeavesTheCurrentOpAlone(t *testing.T) {
	e := newEnv(t, names("n1")...)
	g := nemesis.NewGate(e.rec)
	old := e.hooked(g, 0, 1, time.Second)
	cur := e.hooked(g, 0, 2, time.Second)
	sprang := false
	g.Arm(nemesis.Trap{Client: 0, Command: &nemesis.Command{In: history.Release, Match: "DEL", After: "GET"},
		Then: func(context.Context, int, int) error { sprang = true; return nil }})
	g.Begin(context.Background(), 0, 2, history.Release)
	cur.Get(ctx, "k")
	old.Set(ctx, "other", 1, 0) // the old process's watchdog, between the GET and the DEL
	old.Del(ctx, "k")
	if sprang {
		t.Fatal("a retired process's DEL sprang the current process's trap")
	}
	cur.Del(ctx, "k")
	g.End(0, 2)
	if !sprang {
		t.Fatal("the current process's GET then DEL did not spring the trap")
	}
}

// A Cancel trap gives up on the op for its caller: the command it stands
// at ran, and its caller hears the op's context's error; the process is
// abandoned, not dead, and its connections still work. With no op to
// cancel, the fault is recorded as failed.
func TestCancelTrapGivesUpOnTheOpNotTheProcess(t *testing.T) {
	e := newEnv(t, names("n1")...)
	g := nemesis.NewGate(e.rec)
	c := e.hooked(g, 0, 0, time.Second)
	g.Arm(nemesis.Trap{Client: 0, Command: &nemesis.Command{In: history.Acquire, Match: "SET NX", Reply: true}, Cancel: true})
	op := g.Begin(context.Background(), 0, 0, history.Acquire)
	err := c.SetNX(op, "k", "mine", time.Minute).Err()
	g.End(0, 0)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller gave up at the reply: want context.Canceled, got %v", err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "mine" {
		t.Fatalf("the SET NX the caller gave up on ran: the key is %q, %v; and the process's connection must still work", v, err)
	}
	if !g.Abandoned(0) || g.Dead(0) {
		t.Fatalf("abandoned %v, dead %v: want an abandoned, living process", g.Abandoned(0), g.Dead(0))
	}
	// Armed again where the process is in no op: nothing to cancel.
	g.Arm(nemesis.Trap{Client: 0, Point: "between", Cancel: true})
	if err := g.At(ctx, 0, 0, "between"); err != nil {
		t.Fatal(err)
	}
	var ok, failed int
	for _, o := range e.rec.Ops() {
		if o.F != string(fault.Cancel) {
			continue
		}
		switch o.Type {
		case history.OK:
			ok++
		case history.Fail:
			failed++
		}
	}
	if ok != 1 || failed != 1 {
		t.Fatalf("cancel ops: %d ok, %d failed; want one of each", ok, failed)
	}
}
