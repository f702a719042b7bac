package flock

import (
	"path/filepath"
	"testing"
	"time"
)

// A second taker waits while the first holds the lock, and gets it once
// the first releases it.
func TestTakeWaitsForTheHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	release, err := Take(path)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan func(), 1)
	go func() {
		r, err := Take(path)
		if err != nil {
			t.Error(err)
			r = func() {}
		}
		got <- r
	}()
	select {
	case r := <-got:
		r()
		t.Fatal("the second taker got the lock while the first held it")
	case <-time.After(200 * time.Millisecond):
	}
	release()
	select {
	case r := <-got:
		r()
	case <-time.After(10 * time.Second):
		t.Fatal("the second taker did not get the lock once the first released it")
	}
}
