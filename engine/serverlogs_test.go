package engine

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/verdict"
)

// A run that did not match keeps what its servers logged while it had
// them, and only that: on servers another run left, its copy starts where
// that run's lines end. A run that matched keeps nothing.
func TestARunThatDidNotMatchKeepsItsServersLogs(t *testing.T) {
	if _, err := exec.LookPath("/usr/lib/postgresql/15/bin/postgres"); err != nil {
		t.Skip("PostgreSQL 15 not installed (scripts/setup.sh installs it)")
	}
	ctx := context.Background()
	pool := cluster.NewPool(1)
	defer pool.Close()
	o := Options{Scenario: "baseline", Lock: "pg-advisory", Seed: 7, Out: t.TempDir(), Pool: pool, TimeLimit: 2 * time.Second}
	// A first run starved beside other packages' tests runs again alone.
	first, err := RunUnstarved(ctx, o, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Matched {
		t.Fatalf("baseline / pg-advisory: %s, want safe", first.Outcome)
	}
	if first.ServerLogs != nil {
		t.Errorf("a run that matched kept %v", first.ServerLogs)
	}
	if _, err := os.Stat(filepath.Join(first.Dir, serverLogsDir)); !os.IsNotExist(err) {
		t.Errorf("a run that matched left %s: %v", serverLogsDir, err)
	}
	o.Expect = &verdict.Expectation{Outcome: verdict.Unsafe}
	second, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if second.Reused == "" || second.Matched {
		t.Fatalf("second run: reused %q, matched %v: want the first's servers, not matched", second.Reused, second.Matched)
	}
	if want := []string{"servers/n1.log", "servers/store.log"}; !slices.Equal(second.ServerLogs, want) {
		t.Fatalf("kept %v, want %v", second.ServerLogs, want)
	}
	b, err := os.ReadFile(filepath.Join(second.Dir, "servers", "n1.log"))
	if err != nil {
		t.Fatal(err)
	}
	// Sessions opened after the mark (its clients'), and not the
	// server's start, which was the first run's. Copied again after the
	// pool's reset, it has the reset's session, and every session's end but
	// the reset's own, which ends after it.
	opened, ended := bytes.Count(b, []byte("connection authorized")), bytes.Count(b, []byte("disconnection: session time"))
	if opened == 0 || ended < opened-1 || !bytes.Contains(b, []byte("application_name=locktorture-reset")) ||
		bytes.Contains(b, []byte("ready to accept connections")) {
		t.Errorf("n1.log of the run on kept servers: %d sessions opened, %d ended:\n%s", opened, ended, b)
	}
}

// copyTail copies from an offset to another or to the end, the last
// serverLogMax bytes of a longer stretch, and refuses a file shorter than
// its offset.
func TestCopyTail(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "out", "dst")
	long := strings.Repeat("x", serverLogMax)
	for _, c := range []struct {
		text     string
		from, to int64
		want     string
	}{
		{"the last run's\nthis run's\n", 15, -1, "this run's\n"},
		{"the last run's\nthis run's\nthe next run's\n", 15, 26, "this run's\n"},
		{"ab" + long, 0, -1, long},
		{"", 0, -1, ""},
	} {
		if err := os.WriteFile(src, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := copyTail(src, c.from, c.to, dst); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(dst); string(got) != c.want {
			t.Errorf("from %d of %d bytes: got %d bytes, want %d", c.from, len(c.text), len(got), len(c.want))
		}
	}
	if err := copyTail(src, 5, -1, dst); err == nil {
		t.Error("a file shorter than the offset was copied")
	}
}
