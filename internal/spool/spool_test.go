package spool

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// stuck is a writer that takes nothing until it is let go, as a disk the
// kernel throttles.
type stuck struct {
	release chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
}

func (h *stuck) Write(b []byte) (int, error) {
	<-h.release
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.buf.Write(b)
}

// Writes return while the writer is stuck; Close writes them all, in order.
func TestWritesNeverWaitOnTheWriter(t *testing.T) {
	h := &stuck{release: make(chan struct{})}
	s := New(h)
	done := make(chan struct{})
	var want strings.Builder
	go func() {
		defer close(done)
		for i := range 1000 {
			line := []byte{byte('a' + i%26), '\n'}
			want.Write(line)
			if n, err := s.Write(line); n != 2 || err != nil {
				t.Errorf("Write = %d, %v", n, err)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a write waited on a stuck writer")
	}
	close(h.release)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if h.buf.String() != want.String() {
		t.Fatalf("written out of order or short: %d bytes, want %d", h.buf.Len(), want.Len())
	}
	if n, err := s.Write([]byte("late\n")); n != 5 || err != nil || strings.Contains(h.buf.String(), "late") {
		t.Fatalf("a write after Close: %d, %v, written: %v", n, err, strings.Contains(h.buf.String(), "late"))
	}
}

// The first write error goes to Close, and nothing is written after it.
func TestCloseReportsTheFirstWriteError(t *testing.T) {
	w := &failing{}
	s := New(w)
	for range 3 {
		_, _ = s.Write([]byte("x\n"))
		time.Sleep(time.Millisecond)
	}
	if err := s.Close(); err == nil || err.Error() != "disk full" {
		t.Fatalf("Close = %v, want disk full", err)
	}
	if w.calls != 1 {
		t.Fatalf("%d writes, want 1: none after the error", w.calls)
	}
}

type failing struct{ calls int }

func (f *failing) Write([]byte) (int, error) {
	f.calls++
	return 0, errors.New("disk full")
}
