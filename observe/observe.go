// Package observe reads what the lock nodes themselves held through a run:
// the lock key's owner and its time to live, straight from each node's own
// address, beside the clients and never through their links. Every checker
// before it judged what the clients believed; these observations let one
// judge what Redis held (a key nobody believed they held, a key taken from
// a live owner), whatever the clients thought.
package observe

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/history"
)

// Options says what to watch.
type Options struct {
	// Nodes are the Redis nodes to read (a node of another kind is
	// skipped: only Redis's protocol is read here).
	Nodes []*cluster.Node
	// Keys are the lock keys, as the nodes hold them: each is read on its
	// own, so one key's reads keep their pace whatever the others hold.
	Keys []string
	// Rec receives the observations, as history.Observe ops.
	Rec *history.Recorder
	// Interval is the time between two reads of a node (default 10 ms):
	// a tenth of the shortest story's retry-and-hold cycle, so an owner
	// who holds for one cycle is seen.
	Interval time.Duration
	// Timeout bounds one read (default 100 ms): a node that does not
	// answer within it (paused, killed) is recorded as unreachable, which
	// ends what the observer knew of it.
	Timeout time.Duration
}

// Observer reads the nodes until Stop.
type Observer struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// readScript returns the key's type, owner and PTTL in one atomic read.
// The owner is the value of a string key (the lease token) or the first
// field of a hash (a Redisson-style lock's "owner id"). It declares that
// it writes nothing, so a node refusing writes (MISCONF, out of memory)
// still answers it.
var readScript = redis.NewScript(`#!lua flags=no-writes
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then return {'', -2} end
local owner = ''
if t == 'string' then
  owner = redis.call('GET', KEYS[1])
elseif t == 'hash' then
  local fields = redis.call('HKEYS', KEYS[1])
  if #fields > 0 then owner = fields[1] end
else
  owner = t
end
return {owner, redis.call('PTTL', KEYS[1])}`)

// Start begins reading every Redis node of o.Nodes.
func Start(o Options) *Observer {
	if o.Interval == 0 {
		o.Interval = 10 * time.Millisecond
	}
	if o.Timeout == 0 {
		o.Timeout = 100 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	ob := &Observer{cancel: cancel}
	for _, n := range o.Nodes {
		if !n.Kind().RESP {
			continue
		}
		for _, key := range o.Keys {
			ob.wg.Add(1)
			go func() {
				defer ob.wg.Done()
				watch(ctx, o, n, key)
			}()
		}
	}
	return ob
}

// Stop ends the reading and returns once no observation is being recorded.
func (ob *Observer) Stop() {
	ob.cancel()
	ob.wg.Wait()
}

// state is what one read of a node found.
type state struct {
	owner       string
	deadline    int64 // harness ns, 0: no expiry
	unreachable bool
}

// moved is how far a deadline must move to be recorded again: a renewal
// moves it by a share of the TTL, while the noise of measuring it (a read's
// round trip) stays well under this.
const moved = int64(20 * time.Millisecond)

// changed says whether b is worth recording after a.
func (a state) changed(b state) bool {
	if a.owner != b.owner || a.unreachable != b.unreachable {
		return true
	}
	d := a.deadline - b.deadline
	if (a.deadline == 0) != (b.deadline == 0) {
		return true
	}
	return d > moved || d < -moved
}

func watch(ctx context.Context, o Options, n *cluster.Node, key string) {
	c := cluster.NewClient(n.Addr(), cluster.ClientOptions{Timeout: o.Timeout, PoolSize: 1})
	defer c.Close()
	var last *state
	var prior int64 // when the read before this one was sent
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sent := o.Rec.Now()
		s := read(ctx, c, o.Timeout, key, sent, n.Kind() == cluster.ClusterNodeKind)
		if ctx.Err() != nil {
			return
		}
		before := prior
		prior = sent
		if last != nil && !last.changed(s) {
			continue
		}
		last = &s
		v := &history.Value{Token: s.owner, Deadline: s.deadline, Target: n.Name, Prior: before}
		op := history.Op{Process: history.ObserverProcess, Type: history.OK, F: history.Observe, Key: key, Value: v}
		if s.unreachable {
			op.Error = "no answer within " + o.Timeout.String()
		}
		o.Rec.Add(op)
	}
}

// read reads the key once, sent at harness time sent. The deadline is
// counted from then: the node read its PTTL later than that, so the key
// lives at least until the deadline recorded, never less.
//
// A Redis Cluster node answers only for the slots it serves. It is read
// as it holds the key whatever the slot map says: READONLY lets a replica
// answer for its master's slots, and ASKING lets a master that imports
// the key's slot answer for the keys already moved to it. A node that
// still sends the read elsewhere (MOVED, or ASK for a key it no longer
// has) holds no such key.
func read(ctx context.Context, c *redis.Client, timeout time.Duration, key string, sent int64, clusterNode bool) state {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var r []any
	var err error
	if clusterNode {
		var cmd *redis.Cmd
		_, _ = c.Pipelined(rctx, func(p redis.Pipeliner) error {
			p.ReadOnly(rctx)
			p.Do(rctx, "ASKING")
			cmd = readScript.Eval(rctx, p, []string{key})
			return nil
		})
		r, err = cmd.Slice()
		if err != nil && (strings.HasPrefix(err.Error(), "MOVED ") || strings.HasPrefix(err.Error(), "ASK ")) {
			return state{}
		}
	} else {
		r, err = readScript.Run(rctx, c, []string{key}).Slice()
	}
	if err != nil || len(r) != 2 {
		if errors.Is(err, redis.Nil) {
			return state{}
		}
		return state{unreachable: true}
	}
	owner, _ := r[0].(string)
	pttl, _ := r[1].(int64)
	s := state{owner: owner}
	if owner != "" && pttl >= 0 {
		s.deadline = sent + pttl*int64(time.Millisecond)
	}
	return s
}
