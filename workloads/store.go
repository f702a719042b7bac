package workloads

import (
	"context"
	"errors"
	"strconv"
	"time"

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

// warmBound bounds Warm: long enough for a dial through a loaded link,
// short enough that a process reopened while its store is cut or slowed
// does not wait out the store's whole timeout before its first acquire.
const warmBound = 500 * time.Millisecond

// Warm dials the store's connection as a client process opens, not at
// its first read: a dial through the client's link costs several times
// a read, and a story whose successor must read and write within a
// window (a delayed write's) would pay it inside that window
// (docs/ci-and-benchmarks.md has the figures). A store that does not
// answer here fails the first op instead, as it would have.
func (s *Store) Warm() {
	ctx, cancel := context.WithTimeout(context.Background(), warmBound)
	defer cancel()
	_ = s.c.Ping(ctx).Err()
}

// fencedWriteScript is the store-side check Kleppmann asks for: accept a
// write only if its token is greater than every token accepted before, so a
// holder woken from a pause cannot overwrite its successor's work.
// A token older than one a fenced read saw (ReadFenced) is refused too.
var fencedWriteScript = redis.NewScript(`
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
local seen = tonumber(redis.call('GET', KEYS[3]) or '0')
local fence = tonumber(ARGV[2])
if fence <= last or fence < seen then return 0 end
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
	ok, err := fencedWriteScript.Run(ctx, s.c, []string{key, key + ":fence", key + ":seen"}, strconv.FormatInt(v, 10), fence).Int()
	if err != nil {
		return err
	}
	if ok == 0 {
		return ErrStale
	}
	return nil
}

// FencedReader is a store that checks a token on a read too: it remembers
// the greatest token a read showed it and refuses a read, or a write, with
// an older one. A store that checks tokens on writes alone accepts a stale
// holder's write that lands before its successor's, and the successor,
// which read before it, then writes over it: a read-modify-write loses the
// update all the same. Seeing the successor's token on its read closes
// that gap.
type FencedReader interface {
	ReadFenced(ctx context.Context, key string, fence int64) (int64, error)
}

// fencedReadScript reads the register unless fence is older than a token
// seen before, and remembers fence.
var fencedReadScript = redis.NewScript(`
local seen = tonumber(redis.call('GET', KEYS[2]) or '0')
local fence = tonumber(ARGV[1])
if fence < seen then return {0, 0} end
if fence > seen then redis.call('SET', KEYS[2], ARGV[1]) end
return {1, tonumber(redis.call('GET', KEYS[1]) or '0')}`)

// ReadFenced reads the register with the reader's token: ErrStale when a
// newer one was seen.
func (s *Store) ReadFenced(ctx context.Context, key string, fence int64) (int64, error) {
	r, err := fencedReadScript.Run(ctx, s.c, []string{key, key + ":seen"}, fence).Int64Slice()
	switch {
	case err != nil:
		return 0, err
	case len(r) != 2:
		return 0, errors.New("store: a fenced read answered " + strconv.Itoa(len(r)) + " values")
	case r[0] == 0:
		return 0, ErrStale
	}
	return r[1], nil
}
