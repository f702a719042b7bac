package workloads

import (
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Dist is a length of time drawn afresh each cycle: how long a critical
// section works, how long a client thinks before its next acquire. A
// user's system has such numbers (a critical section of 80 to 300 ms),
// not one fixed length. It is written as the flags and scenario files
// read it:
//
//	200ms           fixed
//	80ms..300ms     uniform between the two
//	exp:200ms       exponential with that mean
//
// The zero Dist is unset: whoever holds it takes a default.
type Dist struct {
	Kind DistKind
	// Min and Max bound a uniform draw; Min is a fixed length; Mean is an
	// exponential's.
	Min, Max, Mean time.Duration
}

// DistKind is a Dist's shape.
type DistKind string

// The shapes a Dist takes.
const (
	Fixed       DistKind = "fixed"
	Uniform     DistKind = "uniform"
	Exponential DistKind = "exp"
)

// FixedDist is d every time.
func FixedDist(d time.Duration) Dist { return Dist{Kind: Fixed, Min: d, Max: d} }

// UniformDist is uniform between lo and hi.
func UniformDist(lo, hi time.Duration) Dist { return Dist{Kind: Uniform, Min: lo, Max: hi} }

// ExpDist is exponential with mean m.
func ExpDist(m time.Duration) Dist { return Dist{Kind: Exponential, Mean: m} }

// maxDist bounds every length a Dist names: an hour is longer than any
// run, and keeps a mistyped unit from overflowing a draw.
const maxDist = time.Hour

// ParseDist reads a Dist as String writes it. Every error says what was
// wrong in one line.
func ParseDist(s string) (Dist, error) {
	bad := func(why string) (Dist, error) {
		return Dist{}, fmt.Errorf("%q: %s (want a length such as 200ms, a range 80ms..300ms, or exp:200ms)", s, why)
	}
	s = strings.TrimSpace(s)
	if mean, ok := strings.CutPrefix(s, "exp:"); ok {
		m, err := parseLength(mean)
		switch {
		case err != nil:
			return bad(err.Error())
		case m <= 0:
			return bad("an exponential needs a positive mean")
		}
		return ExpDist(m), nil
	}
	if lo, hi, ok := strings.Cut(s, ".."); ok {
		a, err1 := parseLength(lo)
		b, err2 := parseLength(hi)
		switch {
		case err1 != nil:
			return bad(err1.Error())
		case err2 != nil:
			return bad(err2.Error())
		case a > b:
			return bad("the range is upside down")
		}
		return UniformDist(a, b), nil
	}
	d, err := parseLength(s)
	if err != nil {
		return bad(err.Error())
	}
	return FixedDist(d), nil
}

// parseLength reads one length: a Go duration, 0 included, never
// negative.
func parseLength(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	switch {
	case s == "":
		return 0, fmt.Errorf("a length is missing")
	case err != nil:
		return 0, fmt.Errorf("%q is not a length", s)
	case d < 0:
		return 0, fmt.Errorf("%s is negative", d)
	case d > maxDist:
		return 0, fmt.Errorf("%s is longer than %s", d, maxDist)
	}
	return d, nil
}

// String writes d as ParseDist reads it ("" when unset).
func (d Dist) String() string {
	switch d.Kind {
	case Fixed:
		return d.Min.String()
	case Uniform:
		return d.Min.String() + ".." + d.Max.String()
	case Exponential:
		return "exp:" + d.Mean.String()
	}
	return ""
}

// IsZero says d is unset.
func (d Dist) IsZero() bool { return d.Kind == "" }

// MarshalText writes d as String does: a scenario file holds "80ms..300ms".
func (d Dist) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads what MarshalText writes.
func (d *Dist) UnmarshalText(b []byte) error {
	v, err := ParseDist(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MeanOf is d's mean: what a sweep plots a distribution at.
func (d Dist) MeanOf() time.Duration {
	switch d.Kind {
	case Uniform:
		return (d.Min + d.Max) / 2
	case Exponential:
		return d.Mean
	}
	return d.Min
}

// Draw is one length from d, from r.
func (d Dist) Draw(r *mrand.Rand) time.Duration {
	switch d.Kind {
	case Uniform:
		return d.Min + time.Duration(r.Int64N(int64(d.Max-d.Min)+1))
	case Exponential:
		// Capped, so one draw in a billion cannot hold a client past any
		// run's end.
		return min(time.Duration(r.ExpFloat64()*float64(d.Mean)), maxDist)
	}
	return d.Min
}

// Shape is the work of a user's system, as the clients do it: how long a
// critical section works, how long a client thinks between cycles, and
// how many lock keys the clients contend for, each guarding a register of
// its own. Every field left zero takes the story's: no work in the
// critical section beyond a read and a write (or the story's own hold),
// a think time uniform from 0 to 4 ms, one key.
type Shape struct {
	Hold  Dist `json:"hold,omitzero"`
	Think Dist `json:"think,omitzero"`
	Keys  int  `json:"keys,omitempty"`
	// FenceReads has the protected store check a fenced lease's token on
	// the read too, as a store must for a read-modify-write to be safe
	// (FencedReader); by default it checks writes alone, as Kleppmann's
	// fencing is usually told.
	FenceReads bool `json:"fence_reads,omitempty"`
}

// MaxKeys bounds Shape.Keys: the observer reads every key on every lock
// node each 10 ms, and a few keys are what contention on several keys
// asks.
const MaxKeys = 16

// Check says in one line what is wrong with s, if anything.
func (s Shape) Check() error {
	if s.Keys < 0 || s.Keys > MaxKeys {
		return fmt.Errorf("keys %d: from 1 to %d", s.Keys, MaxKeys)
	}
	for _, d := range []struct {
		name string
		d    Dist
	}{{"hold", s.Hold}, {"think", s.Think}} {
		if err := d.d.Check(); err != nil {
			return fmt.Errorf("%s %v", d.name, err)
		}
	}
	return nil
}

// Check says what is wrong with a Dist built in code rather than parsed.
func (d Dist) Check() error {
	switch {
	case d.IsZero():
		return nil
	case d.Kind != Fixed && d.Kind != Uniform && d.Kind != Exponential:
		return fmt.Errorf("%q: no such distribution (fixed, uniform, exp)", d.Kind)
	case d.Kind == Exponential && d.Mean <= 0:
		return fmt.Errorf("exp: an exponential needs a positive mean")
	case d.Min < 0 || d.Max < d.Min && d.Kind == Uniform:
		return fmt.Errorf("%s..%s: a range from 0 up, low to high", d.Min, d.Max)
	case max(d.Min, d.Max, d.Mean) > maxDist:
		return fmt.Errorf("%s: longer than %s", d, maxDist)
	}
	return nil
}

// Over is s with every field o sets taken from o.
func (s Shape) Over(o Shape) Shape {
	if !o.Hold.IsZero() {
		s.Hold = o.Hold
	}
	if !o.Think.IsZero() {
		s.Think = o.Think
	}
	if o.Keys != 0 {
		s.Keys = o.Keys
	}
	s.FenceReads = s.FenceReads || o.FenceReads
	return s
}

// DefaultThink is the think time a story's clients take unless told
// otherwise: a few ms, so waiters and holders interleave without the
// lock sitting free.
var DefaultThink = UniformDist(0, 4*time.Millisecond)

// Key is one lock key and the register it guards.
type Key struct{ Lock, Register string }

// KeysOf are n keys: the one key "lock" guarding "register", as every
// story is told on, or lock-1 ... lock-n guarding register-1 ...
func KeysOf(n int) []Key {
	if n <= 1 {
		return []Key{{Lock: "lock", Register: "register"}}
	}
	out := make([]Key, n)
	for i := range out {
		s := strconv.Itoa(i + 1)
		out[i] = Key{Lock: "lock-" + s, Register: "register-" + s}
	}
	return out
}
