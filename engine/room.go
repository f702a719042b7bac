package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"syscall"
	"time"
)

// The room is machine-wide: every run of a story on this machine, from any
// process (a matrix, go test's packages side by side, a user's second
// terminal), holds some of its seats, three per core, and a story marked
// Alone holds them all. A seat is a third of a core: a light run
// (Resolved.Seats) takes one, any other two (PairSeats). The cores stood
// about 70% busy through a matrix at two seats a core; at three, the
// whole matrix kept every verdict, idle and beside two busy loops, which
// starved about 1% of its first runs; those ran again alone
// (docs/ci-and-benchmarks.md). A matrix's -parallel bounds only its own
// runs; the room bounds them all, so `make test` can run the unit tests
// beside the matrix without more stories than the cores can carry, and a
// watchdog story still gets the machine to itself. A matrix also
// narrows its own share of the room where its runs measure the machine
// late (cmd/run's width): three a core is one machine's figure.
//
// A seat is a name in Linux's abstract unix-socket namespace, held by
// listening on it: only one process can, the kernel frees it when that
// process dies, and nothing is left in the file system afterwards. One more
// name is a turnstile that gives an Alone story priority: once it waits,
// runs that arrive later queue behind it instead of keeping seats taken
// forever.
type room struct {
	// name prefixes the room's socket names; seats is how many there are.
	name  string
	seats int
}

// SeatsPerCore is how many seats the room has per core.
const SeatsPerCore = 3

// PairSeats is how many seats a run takes that is neither light nor alone
// (Resolved.Seats): two thirds of a core.
const PairSeats = 2

// machineRoom is the room every run enters, three seats per core (tests
// make rooms of their own).
func machineRoom() room {
	return room{name: "locktorture-room", seats: SeatsPerCore * runtime.NumCPU()}
}

// Seats is how many seats the machine's room has, three per core: how many
// light runs it holds at once, and what a matrix's time left is reckoned
// with.
func Seats() int { return machineRoom().seats }

// roomPoll is how often a waiting run tries again: a taken name cannot be
// waited on, and a story waiting for the room has no finer timing to keep.
const roomPoll = 20 * time.Millisecond

// enter waits until the run holds n of the room's seats (all of them,
// alone, for n at or above the room's) and returns what gives them up. It
// says once, through logf, that it waits. A cancelled ctx ends the wait
// with ctx's error.
func (r room) enter(ctx context.Context, n int, logf func(string, ...any)) (leave func(), err error) {
	n = min(max(n, 1), r.seats)
	alone := n == r.seats
	var held []net.Listener
	leave = func() {
		for _, l := range held {
			l.Close()
		}
	}
	said := false
	until := func(done func() (bool, error)) error {
		for {
			ok, err := done()
			if ok || err != nil {
				return err
			}
			if !said {
				said = true
				if alone {
					logf("waiting for the other locktorture runs on this machine to end: this story runs alone")
				} else {
					logf("waiting for %d seat(s): other locktorture runs use the %d of this machine's", n, r.seats)
				}
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(roomPoll):
			}
		}
	}
	var turnstile net.Listener
	err = until(func() (ok bool, err error) {
		turnstile, ok, err = r.take("turnstile")
		return ok, err
	})
	if err != nil {
		return nil, roomErr(err)
	}
	// Giving the turnstile up on return lets the next arrival through.
	defer turnstile.Close()
	taken := make([]bool, r.seats)
	err = until(func() (bool, error) {
		for i := range taken {
			if taken[i] {
				continue
			}
			l, ok, err := r.take(fmt.Sprintf("seat%d", i))
			if err != nil {
				return false, err
			}
			if ok {
				held, taken[i] = append(held, l), true
				if len(held) == n {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		leave()
		return nil, roomErr(err)
	}
	return leave, nil
}

// take holds the room's name part if no process holds it.
func (r room) take(part string) (net.Listener, bool, error) {
	l, err := net.Listen("unix", "@"+r.name+"."+part)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("the machine-wide room: %w", err)
	}
	return l, true, nil
}

func roomErr(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("not started: %w", err)
	}
	return err
}
