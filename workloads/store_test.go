package workloads_test

import (
	"context"
	"errors"
	"testing"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/workloads"
)

// A stale holder (token 10) whose write lands before its successor's
// (token 11), both having read 0: a store that checks tokens on writes
// alone accepts both, and the successor's write undoes the stale one's
// increment; a store that saw token 11 on the successor's read refuses
// the stale write, and any later read with token 10.
func TestFencedReadsCloseTheReadModifyWriteGap(t *testing.T) {
	ctx := context.Background()
	_, node := lockAndStore(t)
	store := workloads.NewStore(cluster.NewClient(node.Addr(), cluster.ClientOptions{}))

	// Writes alone checked: both writes of 1 are accepted.
	if _, err := store.Read(ctx, "plain"); err != nil {
		t.Fatal(err)
	}
	if err := store.Write(ctx, "plain", 1, 10); err != nil {
		t.Fatalf("the stale write, first to land: %v", err)
	}
	if err := store.Write(ctx, "plain", 1, 11); err != nil {
		t.Fatalf("the successor's write: %v", err)
	}

	// Reads checked too.
	for _, fence := range []int64{10, 11} {
		if v, err := store.ReadFenced(ctx, "fenced", fence); err != nil || v != 0 {
			t.Fatalf("read with token %d: %d, %v", fence, v, err)
		}
	}
	if err := store.Write(ctx, "fenced", 1, 10); !errors.Is(err, workloads.ErrStale) {
		t.Fatalf("the stale write after its successor's read: %v, want ErrStale", err)
	}
	if err := store.Write(ctx, "fenced", 1, 11); err != nil {
		t.Fatalf("the successor's write: %v", err)
	}
	if _, err := store.ReadFenced(ctx, "fenced", 10); !errors.Is(err, workloads.ErrStale) {
		t.Fatalf("a read with the stale token: %v, want ErrStale", err)
	}
	if v, err := store.ReadFenced(ctx, "fenced", 12); err != nil || v != 1 {
		t.Fatalf("the next holder's read: %d, %v", v, err)
	}
}
