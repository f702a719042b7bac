package scenario

import (
	"slices"
	"testing"

	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/locks/library"
	"github.com/locktorture/locktorture/locks/services"
	"github.com/locktorture/locktorture/verdict"
)

// Every story that tells has a word about every registered lock: an
// expectation, or a reason to leave it out. A lock registered with traits
// no rule covers fails here, naming the stories that need a word.
func TestEveryStoryJudgesEveryLock(t *testing.T) {
	library.Register()
	services.Register()
	for _, pair := range Unjudged() {
		t.Errorf("%s: no expectation and no reason to leave the lock out (add a rule over its traits, an override with its why, or a leaveOut)", pair)
	}
}

// A lock whose traits no rule reads is named unjudged in the stories that
// tell, while one that states the traits of a lease like set-nx-px is
// judged wherever set-nx-px's kind is, without a word of its own.
func TestTraitsDecideWhereALockIsJudged(t *testing.T) {
	odd := locks.Info{Name: "throwaway", Nodes: 1, Traits: locks.Traits{Ends: "a-way-no-rule-knows", Release: locks.OwnerChecked}}
	unjudged := UnjudgedBy(odd)
	for _, story := range []string{"paused-holder", "delayed-write", "watchdog-stall"} {
		if !slices.Contains(unjudged, story) {
			t.Errorf("a lock with an ending no rule knows is not named unjudged in %s (named in %v)", story, unjudged)
		}
	}
	lease := locks.Info{Name: "my-lease", Library: "example.com/mylease", Nodes: 1,
		Traits: locks.Traits{Ends: locks.Expires, Release: locks.OwnerChecked, Clock: locks.ServerWall}}
	if u := UnjudgedBy(lease); len(u) > 0 {
		t.Errorf("a library lease with set-nx-px's traits is unjudged in %v", u)
	}
	s, _ := Lookup("paused-holder")
	j := s.Judge(lease)
	if j.Expect == nil || j.Expect.Outcome != verdict.Unsafe {
		t.Errorf("paused-holder judges a library lease %+v, want unsafe", j)
	}
	fencedLease := lease
	fencedLease.Fenced = true
	if j := s.Judge(fencedLease); j.Expect == nil || j.Expect.Outcome != verdict.LockUnsafe {
		t.Errorf("paused-holder judges a fenced library lease %+v, want lock-unsafe", j)
	}
}

// The first rule that picks a lock decides, so an override stands before
// the rule of its kind; a story's NotFor line comes before any rule.
func TestTheFirstRuleDecides(t *testing.T) {
	safe := verdict.Expectation{Outcome: verdict.Safe, Why: "override"}
	unsafe := verdict.Expectation{Outcome: verdict.Unsafe, Why: "kind"}
	s := Scenario{Rules: []Rule{expect(lock("a"), safe), expect(expires, unsafe)}, NotFor: notFor("not here", "zookeeper")}
	a := locks.Info{Name: "a", Traits: locks.Traits{Ends: locks.Expires}}
	b := locks.Info{Name: "b", Traits: locks.Traits{Ends: locks.Expires}}
	zk := locks.Info{Name: "a", Server: "zookeeper", Traits: locks.Traits{Ends: locks.Expires}}
	if j := s.Judge(a); j.Expect == nil || j.Expect.Why != "override" {
		t.Errorf("a: %+v, want the override", j)
	}
	if j := s.Judge(b); j.Expect == nil || j.Expect.Why != "kind" {
		t.Errorf("b: %+v, want the kind's rule", j)
	}
	if j := s.Judge(zk); j.Skipped != "not here" {
		t.Errorf("a lock on zookeeper: %+v, want NotFor's reason", j)
	}
	if j := (Scenario{}).Judge(b); !j.Unjudged() {
		t.Errorf("a story without rules judged b: %+v", j)
	}
}
