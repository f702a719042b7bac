package cluster

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client is a go-redis cluster client for peer: it learns the slots from
// the nodes, as applications do, and reaches each node through peer's own
// link to it. Like every client of the harness it sends a command once:
// go-redis's cluster client would otherwise send again, to the same node
// and then another, a command whose reply timed out or whose connection
// broke, after it may have run; here that is the caller's unknown outcome.
// It still follows MOVED and ASK, and tries again on CLUSTERDOWN and
// TRYAGAIN: those say the command did not run. Its slot map is reloaded
// every ReloadInterval.
func (rc *RedisCluster) Client(peer string, o ClientOptions) *redis.ClusterClient {
	u := harnessOptions(o, linkDialer(peer, rc.byAddr))
	for _, m := range rc.Masters {
		u.Addrs = append(u.Addrs, rc.announced(m))
	}
	co := u.Cluster()
	co.MaxRedirects = 3
	co.ClusterStateReloadInterval = ReloadInterval
	c := redis.NewClusterClient(co)
	c.OnNewNode(func(n *redis.Client) { n.AddHook(sendOnce{}) })
	return c
}

// ReloadInterval is how old the slot map a cluster client routes by may
// grow before its next command reloads it. go-redis's default is 60 s and
// it reloads sooner only on MOVED: a master that died sends none, so its
// clients would dial the dead master for a minute after its replica took
// over. The harness's clients reload it every 250 ms, as clients that
// watch the topology do (Lettuce's adaptive refresh, redis-py's reload on
// a connection error), so a story sees the lock, not go-redis's wait.
const ReloadInterval = 250 * time.Millisecond

// sendOnce turns a transport error on a command that was written into an
// error go-redis's cluster client does not retry: its outcome is unknown,
// and the caller must hear so. A failed dial (nothing was sent) is left
// alone.
type sendOnce struct{}

// errSentOnce is a transport error after a command may have been written.
type errSentOnce struct{ err string }

func (e errSentOnce) Error() string { return e.err }

func (sendOnce) DialHook(next redis.DialHook) redis.DialHook { return next }

func (sendOnce) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return once(next(ctx, cmd), cmd)
	}
}

func (sendOnce) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			once(cmd.Err(), cmd)
		}
		return once(err, nil)
	}
}

// once is err, made final when it is a transport error that is no failed
// dial; cmd, when given, carries the final error too.
func once(err error, cmd redis.Cmder) error {
	if err == nil {
		return nil
	}
	var opErr *net.OpError
	var rerr redis.Error
	switch {
	case errors.As(err, &opErr) && opErr.Op == "dial", errors.As(err, &rerr),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, redis.ErrClosed):
		return err
	}
	final := errSentOnce{err: err.Error()}
	if cmd != nil {
		cmd.SetErr(final)
	}
	return final
}
