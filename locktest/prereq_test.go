package locktest_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/locktest"
	"github.com/locktorture/locktorture/scenario"
)

// setupCommand is the fix every message names: what a user's CI runs.
const setupCommand = "run go run github.com/locktorture/locktorture/cmd/setup"

// A machine without a piece a story needs stops the test before any story
// runs, with one line that names the piece and the command that installs
// it.
func TestAMissingPieceIsOneLineNamingTheFix(t *testing.T) {
	for _, c := range []struct {
		name  string
		env   map[string]string
		want  map[string]string
		story *scenario.Scenario
		says  string
	}{
		{name: "no redis-server", env: map[string]string{"PATH": t.TempDir()},
			want: map[string]string{"baseline": "safe"}, says: "locktest: redis-server not found on PATH: " + setupCommand},
		{name: "no libc-allocator redis-server for a clock story",
			env:  map[string]string{"LOCKTORTURE_FAKETIME_REDIS": filepath.Join(t.TempDir(), "redis-server")},
			want: map[string]string{"baseline": "safe", "redlock-clock-jump": "unsafe"},
			says: "locktest: the libc-allocator redis-server (for clock stories: libfaketime hangs the jemalloc build) not found at "},
		{name: "no redis-server for a story of your own", env: map[string]string{"PATH": t.TempDir()},
			story: &scenario.Scenario{Name: "mine"}, says: "locktest: redis-server not found on PATH: " + setupCommand},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			r := &recorder{TB: t}
			start := time.Now()
			done := make(chan struct{})
			go func() {
				defer close(done)
				if c.story != nil {
					locktest.ExpectStory(r, setNXPX(), *c.story, "safe", engine.Options{})
				} else {
					locktest.Expect(r, setNXPX(), c.want)
				}
			}()
			<-done
			if !r.failed || len(r.errors) != 1 {
				t.Fatalf("want the test stopped with one error: failed=%v errors=%q", r.failed, r.errors)
			}
			msg := r.errors[0]
			if !strings.HasPrefix(msg, c.says) || !strings.HasSuffix(msg, setupCommand) || strings.Contains(msg, "\n") {
				t.Errorf("got %q, want one line starting %q and ending %q", msg, c.says, setupCommand)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("took %v: a story ran before the machine was checked", d)
			}
		})
	}
}
