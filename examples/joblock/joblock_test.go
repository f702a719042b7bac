package joblock_test

import (
	"testing"

	"example.com/joblock"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/locktest"
)

// The guard renews its lease, so a slow job keeps it (watchdog-stall) and a
// slow network to the store does not hand it to a second worker
// (delayed-write); a worker frozen whole stops renewing like anything else
// (paused-holder), and a failover loses the lock with the master.
func TestJobGuardUnderTheStories(t *testing.T) {
	guard := locktest.Lock{Name: "job-guard", New: joblock.New, Claims: locks.WatchdogClaims}
	locktest.Expect(t, guard, map[string]string{
		"baseline":       "safe",
		"paused-holder":  "unsafe -promise-broken",
		"delayed-write":  "safe",
		"watchdog-stall": "safe",
	})
}
