// Package spool hands bytes to a writer from a goroutine of its own, so
// that whoever writes never waits on the disk. The kernel may hold back
// any write to a file for hundreds of milliseconds while dirty pages drain
// (a busy machine's other jobs fill them). A client of a story that waits
// so, inside a lock the others need or before its next command, can
// outlast its lease, and the lateness meter, which writes nothing, would
// not see it.
package spool

import (
	"io"
	"sync"
)

// Writer queues what it is given and writes it to its writer in turns,
// in the order given. Write never blocks on the writer and never fails:
// the first write error is kept for Close, and what comes after it, or
// after Close, is dropped, so a process whose stderr a Writer drains is
// never held up by it either.
type Writer struct {
	w    io.Writer
	wake chan struct{} // one pending wake-up is enough: run takes all there is
	done chan struct{}

	mu      sync.Mutex
	buf     []byte // given, not yet taken by run
	err     error  // the first write error; nothing is written after it
	closing bool
}

// New starts a Writer that writes to w.
func New(w io.Writer) *Writer {
	s := &Writer{w: w, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run()
	return s
}

// Write queues a copy of p and returns len(p), nil.
func (s *Writer) Write(p []byte) (int, error) {
	s.mu.Lock()
	if !s.closing {
		s.buf = append(s.buf, p...)
	}
	s.mu.Unlock()
	s.poke()
	return len(p), nil
}

func (s *Writer) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run writes whatever has been queued, in turns, until Close.
func (s *Writer) run() {
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

// Close writes what is still queued, and reports the first write error.
// It does not close the writer.
func (s *Writer) Close() error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	// A wake-up still pending is taken after closing was set, and finds
	// the rest of the queue; if none is, this one is.
	s.poke()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}
