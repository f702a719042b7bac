package scenario

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// The room is machine-wide: every run of a story on this machine, from any
// process (a matrix, go test's packages side by side, a user's second
// terminal), holds it shared, and a story marked Alone holds it alone. A
// matrix can give an Alone story the machine only among its own runs; the
// room makes that true of every locktorture process, so `make test` can run
// the unit tests beside the matrix without starving a watchdog.
//
// It is two flock(2) files in the system temp dir. Locks die with their
// process, so a killed run never leaves the room locked. The second file is
// a turnstile that gives an Alone story priority: once it waits, runs that
// arrive later queue behind it instead of keeping the room shared forever.
const (
	roomFile      = "locktorture-room.lock"
	turnstileFile = "locktorture-room.turnstile"
)

// roomPoll is how often a waiting run tries again: flock cannot wait on a
// context, and a story waiting for the room has no finer timing to keep.
const roomPoll = 20 * time.Millisecond

// enterRoom waits until the run may start (alone or beside others) and
// returns what leaves the room. It says once, through logf, that it waits.
// A cancelled ctx ends the wait with ctx's error.
func enterRoom(ctx context.Context, alone bool, logf func(string, ...any)) (leave func(), err error) {
	turnstile, err := openLockFile(turnstileFile)
	if err != nil {
		return nil, err
	}
	defer turnstile.Close()
	room, err := openLockFile(roomFile)
	if err != nil {
		return nil, err
	}
	said := false
	wait := func(f *os.File, how int) error {
		for {
			err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
			if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
				return err
			}
			if !said {
				said = true
				if alone {
					logf("waiting for other locktorture runs on this machine to end: this story runs alone")
				} else {
					logf("waiting: a locktorture run on this machine has it to itself")
				}
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(roomPoll):
			}
		}
	}
	how := syscall.LOCK_SH
	if alone {
		how = syscall.LOCK_EX
	}
	// Closing turnstile on return lets the next arrival through.
	if err := wait(turnstile, syscall.LOCK_EX); err != nil {
		room.Close()
		return nil, roomErr(err)
	}
	if err := wait(room, how); err != nil {
		room.Close()
		return nil, roomErr(err)
	}
	return func() { room.Close() }, nil
}

func openLockFile(name string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), name), os.O_RDONLY|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("the machine-wide room: %w", err)
	}
	return f, nil
}

func roomErr(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("not started: %w", err)
	}
	return fmt.Errorf("the machine-wide room: %w", err)
}
