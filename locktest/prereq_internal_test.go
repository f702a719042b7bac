package locktest

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/internal/prereq"
	"github.com/locktorture/locktorture/scenario"
)

// Only what the stories need is required: a story that fakes no clock
// does not ask for the clock's pieces, the docker backend's containers
// carry their own binaries, and a redis-server you name is looked for
// as named, with no command to install it.
func TestOnlyWhatTheStoriesNeedIsRequired(t *testing.T) {
	t.Setenv("LOCKTORTURE_FAKETIME_REDIS", filepath.Join(t.TempDir(), "redis-server"))
	if err := missing(engine.Options{}, "baseline", "paused-holder"); err != nil {
		t.Errorf("stories without a faked clock: %v", err)
	}
	var m *prereq.Missing
	if err := missing(engine.Options{}, "baseline", "redlock-clock-jump"); !errors.As(err, &m) || m.Piece != prereq.FaketimeServer.Name {
		t.Errorf("a clock story without the libc-allocator redis-server: got %v", err)
	}
	story := scenario.Scenario{Name: "mine", Topology: scenario.Topology{Clock: true}}
	if err := missing(engine.Options{Told: &story}); !errors.As(err, &m) || m.Piece != prereq.FaketimeServer.Name {
		t.Errorf("a story of your own with a faked clock: got %v", err)
	}

	t.Setenv("PATH", t.TempDir())
	if err := missing(engine.Options{Backend: "docker"}, "redlock-clock-jump"); err != nil {
		t.Errorf("the docker backend was checked for local binaries: %v", err)
	}
	own := filepath.Join(t.TempDir(), "my-redis-server")
	err := missing(engine.Options{Server: own}, "baseline")
	if !errors.As(err, &m) || m.Setup || err.Error() != own+" not found" {
		t.Errorf("a redis-server of your own: got %v, want %q with no setup command", err, own+" not found")
	}
}
