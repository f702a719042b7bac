package nemesis_test

import (
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/nemesis"
)

// A crash at a point is in the history, as the process's end, before the
// kill takes effect. Here a server records a grant to another process as
// soon as the dead process's connection closes, as MariaDB hands a waiter
// the row a killed holder's transaction held: the grant must come after
// the end. Recorded by the process's own code once At returned, the end
// came after such a grant on a loaded machine, and killed-holder /
// mysql-for-update read two holders for 37 µs.
func TestAPointCrashIsRecordedBeforeItsEffect(t *testing.T) {
	rec := history.NewRecorder(nil, 0)
	g := nemesis.NewGate(rec)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	granted := make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 512)
		for {
			n, err := c.Read(buf)
			if err != nil {
				rec.Complete(rec.Invoke(9, history.Acquire, "lock", nil), history.OK, nil, nil)
				close(granted)
				return
			}
			reply := "+PONG\r\n"
			if strings.Contains(strings.ToUpper(string(buf[:n])), "HELLO") {
				reply = "-ERR unknown command 'HELLO'\r\n" // an old server's: go-redis goes on without
			}
			_, _ = c.Write([]byte(reply))
		}
	}()
	c := cluster.NewClient(ln.Addr().String(), cluster.ClientOptions{})
	defer c.Close()
	c.AddHook(g.Hook(0, 0, false))
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	g.Arm(nemesis.Trap{Point: "p", Client: 0, Crash: true})
	err = g.At(ctx, 0, 0, "p")
	if !errors.Is(err, nemesis.ErrCrashed) || !errors.Is(err, history.ErrEndRecorded) {
		t.Fatalf("At: %v; want the crash, its end recorded", err)
	}
	select {
	case <-granted:
	case <-time.After(5 * time.Second):
		t.Fatal("the kill did not close the process's connection")
	}
	ops := rec.Ops()
	end := slices.IndexFunc(ops, func(op history.Op) bool { return op.Process == 0 && op.F == history.Crash && op.Type == history.Info })
	grant := slices.IndexFunc(ops, func(op history.Op) bool { return op.Process == 9 && op.Type == history.OK })
	if end < 0 || end > grant {
		t.Fatalf("the process's end at %d, the grant its death allowed at %d: want the end first\n%v", end, grant, ops)
	}
}
