package history

import (
	"io"
	"sync"
)

// spool hands a history's lines to its file from a goroutine of its own,
// so a client that records an op never waits on the disk. The kernel may
// hold back any write to a file for hundreds of milliseconds while dirty
// pages drain (a busy machine's other jobs fill them); inside the
// recorder's lock that stalled every client at once, long enough for a
// lease to lapse under a holder, and the lateness meter, which records
// nothing, would not see it. Lines reach the writer in the order they were
// added; close writes what is left before it returns.
type spool struct {
	w    io.Writer
	wake chan struct{} // one pending wake-up is enough: run takes all there is
	done chan struct{}

	mu      sync.Mutex
	buf     []byte // added, not yet taken by run
	err     error  // the first write error; nothing is written after it
	closing bool
}

func newSpool(w io.Writer) *spool {
	s := &spool{w: w, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run()
	return s
}

// add queues line for the writer; it never blocks on the writer.
func (s *spool) add(line []byte) {
	s.mu.Lock()
	s.buf = append(s.buf, line...)
	s.mu.Unlock()
	s.poke()
}

func (s *spool) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run writes whatever has been added, in turns, until close.
func (s *spool) run() {
	defer close(s.done)
	var out []byte
	for range s.wake {
		s.mu.Lock()
		out, s.buf = s.buf, out[:0]
		closing, failed := s.closing, s.err != nil
		s.mu.Unlock()
		if len(out) > 0 && !failed {
			if _, err := s.w.Write(out); err != nil {
				s.mu.Lock()
				s.err = err
				s.mu.Unlock()
			}
		}
		if closing {
			return
		}
	}
}

// close writes what is left and reports the first write error. Nothing
// added after it is written.
func (s *spool) close() error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	// A wake-up still pending is taken after closing was set, and finds
	// the rest of the buffer; if none is, this one is.
	s.poke()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}
