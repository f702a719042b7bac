package workloads

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/checker"
)

// Resource is the protected register as a client process reaches it.
type Resource interface {
	// Read returns the register's value (0 when never written).
	Read(ctx context.Context, key string) (int64, error)
	// Write sets the register; with fence > 0 the store checks the token
	// and returns ErrStale when it is not greater than the last accepted.
	Write(ctx context.Context, key string, v, fence int64) error
}

// Store is the protected resource: a register on its own Redis node, apart
// from the lock nodes, that clients touch inside the critical section.
type Store struct {
	c *redis.Client
}

// NewStore wraps one client's connection to the storage node.
func NewStore(c *redis.Client) *Store { return &Store{c: c} }

// fencedWriteScript is the store-side check Kleppmann asks for: accept a
// write only if its token is greater than every token accepted before, so a
// holder woken from a pause cannot overwrite its successor's work.
var fencedWriteScript = redis.NewScript(`
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[2]) <= last then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SET', KEYS[1], ARGV[1])
return 1`)

// ErrStale is returned by Write when the store refused a stale token; its
// text is what the resource checker counts.
var ErrStale = errors.New(checker.ErrStaleFence)

// Read returns the register's value (0 when never written).
func (s *Store) Read(ctx context.Context, key string) (int64, error) {
	v, err := s.c.Get(ctx, key).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}

// Write sets the register. With fence > 0 the store checks the token and
// returns ErrStale when it is not greater than the last accepted one.
func (s *Store) Write(ctx context.Context, key string, v, fence int64) error {
	if fence == 0 {
		return s.c.Set(ctx, key, v, 0).Err()
	}
	ok, err := fencedWriteScript.Run(ctx, s.c, []string{key, key + ":fence"}, strconv.FormatInt(v, 10), fence).Int()
	if err != nil {
		return err
	}
	if ok == 0 {
		return ErrStale
	}
	return nil
}
