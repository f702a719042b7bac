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
// terminal), holds one of its seats, one per core, and a story marked Alone
// holds them all. A matrix's -parallel bounds only its own runs; the room
// bounds them all, so `make test` can run the unit tests beside the matrix
// without four stories fighting over two cores, and a watchdog story still
// gets the machine to itself.
//
// Seats are flock(2) files in the system temp dir. Locks die with their
// process, so a killed run never leaves a seat taken. One more file is a
// turnstile that gives an Alone story priority: once it waits, runs that
// arrive later queue behind it instead of keeping seats taken forever.
const (
	seatFile      = "locktorture-room.seat%d"
	turnstileFile = "locktorture-room.turnstile"
)

// roomPoll is how often a waiting run tries again: flock cannot wait on a
// context, and a story waiting for the room has no finer timing to keep.
const roomPoll = 20 * time.Millisecond

// enterRoom waits until the run has a seat of the room's seats (all of
// them, alone) and returns what gives them up. It says once, through logf,
// that it waits. A cancelled ctx ends the wait with ctx's error.
func enterRoom(ctx context.Context, seats int, alone bool, logf func(string, ...any)) (leave func(), err error) {
	turnstile, err := openLockFile(turnstileFile)
	if err != nil {
		return nil, err
	}
	// Closing the turnstile on return lets the next arrival through.
	defer turnstile.Close()
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			if f != nil {
				f.Close()
			}
		}
	}
	free := make([]*os.File, seats)
	for i := range free {
		if free[i], err = openLockFile(fmt.Sprintf(seatFile, i)); err != nil {
			closeAll(free)
			return nil, err
		}
	}
	defer func() { closeAll(free) }()

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
					logf("waiting for a seat: other locktorture runs use all %d of this machine's", seats)
				}
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(roomPoll):
			}
		}
	}
	if err := until(func() (bool, error) { return tryLock(turnstile) }); err != nil {
		return nil, roomErr(err)
	}
	var held []*os.File
	err = until(func() (bool, error) {
		for i, f := range free {
			if f == nil {
				continue
			}
			ok, err := tryLock(f)
			if err != nil {
				return false, err
			}
			if ok {
				held, free[i] = append(held, f), nil
				if !alone {
					return true, nil
				}
			}
		}
		return len(held) == seats, nil
	})
	if err != nil {
		closeAll(held)
		return nil, roomErr(err)
	}
	return func() { closeAll(held) }, nil
}

// tryLock takes f's lock if no one holds it.
func tryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EINTR) {
		return false, nil
	}
	return err == nil, err
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
