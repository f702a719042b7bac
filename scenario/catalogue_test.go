package scenario

import (
	"slices"
	"testing"

	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/locks/library"
	"github.com/locktorture/locktorture/locks/services"
	"github.com/locktorture/locktorture/verdict"
)

func TestEveryScenarioIsWellFormed(t *testing.T) {
	library.Register()
	services.Register()
	for _, name := range Names() {
		s, _ := Lookup(name)
		if s.Story == "" || s.Plan == nil && s.Schedule == nil && s.Draw == nil || len(s.Expect) == 0 {
			t.Errorf("%s lacks a story, a schedule or expectations", name)
		}
		if s.Sources() != 1 {
			t.Errorf("%s gives its schedule %d ways, want one of Plan, Draw and Schedule", name, s.Sources())
		}
		if s.MinTimeLimitTTLs > s.TimeLimitTTLs {
			t.Errorf("%s: default time limit below its minimum", name)
		}
		for lock, e := range s.Expect {
			if e.Why == "" {
				t.Errorf("%s/%s: an expectation must cite its argument", name, lock)
			}
			switch {
			case s.Exploration && e.Outcome == verdict.PromiseKept:
			case s.Exploration:
				t.Errorf("%s/%s: random runs are judged against the lock's claims (%s), got %q", name, lock, verdict.PromiseKept, e.Outcome)
			case e.Outcome == verdict.Safe, e.Outcome == verdict.Unsafe, e.Outcome == verdict.LockUnsafe, e.Outcome == verdict.Deadlock, e.Outcome == verdict.Unfair:
			default:
				t.Errorf("%s/%s: unknown outcome %q", name, lock, e.Outcome)
			}
		}
		// A story with a fault must say what proves it happened.
		faultFree := map[string]bool{"baseline": true, "fair-order": true}
		if !s.Exploration && !faultFree[name] && len(s.Requires) == 0 {
			t.Errorf("%s: a story with a fault must list the nemesis actions it requires", name)
		}
	}
}

// Every anomaly kind a matrix expectation names is a word the parser knows.
func TestObservationWordsCoverTheCatalogue(t *testing.T) {
	for _, s := range catalogue() {
		for lock, e := range s.Expect {
			for _, o := range append(slices.Clone(e.Show), e.Hide...) {
				if !slices.Contains(verdict.ObservationWords, o) {
					t.Errorf("%s/%s: %q is not in verdict.ObservationWords", s.Name, lock, o)
				}
			}
		}
	}
}

// A reader comparing services sees, for every story, either a lock of
// each server kind judged or why none can be: never a silent gap.
func TestEveryStorySaysWhyAServiceIsLeftOut(t *testing.T) {
	library.Register()
	services.Register()
	kinds := []string{redis, zookeeper, etcd, postgres, memcached, mariadb}
	for _, s := range catalogue() {
		if s.Exploration {
			continue
		}
		judged := map[string]bool{}
		for lock := range s.Expect {
			info, err := locks.Lookup(lock)
			if err != nil {
				t.Errorf("%s expects something of %s, which is no registered lock", s.Name, lock)
				continue
			}
			judged[info.ServerKind()] = true
		}
		for _, k := range kinds {
			switch {
			case judged[k] && s.NotFor[k] != "":
				t.Errorf("%s judges a %s lock and also says it cannot apply to them", s.Name, k)
			case !judged[k] && s.NotFor[k] == "":
				t.Errorf("%s judges no %s lock and does not say why (NotFor)", s.Name, k)
			}
		}
	}
}
