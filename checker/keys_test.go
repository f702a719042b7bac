package checker

import (
	"testing"
	"time"

	"github.com/locktorture/locktorture/history"
)

// ms is a harness time in milliseconds, as ns.
func ms(n int64) int64 { return n * int64(time.Millisecond) }

// seen records what node held of key L at t: owner "" is an absent key,
// deadline 0 no expiry, "down" a node that did not answer.
func (x *h) seen(node, owner string, deadline, at int64) *h {
	op := history.Op{Index: int64(len(*x)), Process: history.ObserverProcess, Type: history.OK, F: history.Observe, Key: "L",
		Value: &history.Value{Token: owner, Deadline: deadline, Target: node}, Time: at}
	if owner == "down" {
		op.Value.Token, op.Error = "", "no answer"
	}
	*x = append(*x, op)
	return x
}

// seenSince is seen with the time the node's read before this one was
// sent, which still found what the previous observation recorded.
func (x *h) seenSince(node, owner string, deadline, prior, at int64) *h {
	x.seen(node, owner, deadline, at)
	(*x)[len(*x)-1].Value.Prior = prior
	return x
}

// grant is p's acquire of L, returning token with a promise to deadline.
func (x *h) grant(p int, token string, deadline, a0, a1 int64) *h {
	x.add(p, history.Invoke, history.Acquire, "L", nil, a0, "")
	return x.add(p, history.OK, history.Acquire, "L", &history.Value{Token: token, Deadline: deadline}, a1, "")
}

func (x *h) release(p int, token string, r0, r1 int64, t history.Type) *h {
	x.add(p, history.Invoke, history.Release, "L", &history.Value{Token: token}, r0, "")
	return x.add(p, t, history.Release, "L", nil, r1, "")
}

func (x *h) refused(p int, a0, a1 int64) *h {
	x.add(p, history.Invoke, history.Acquire, "L", nil, a0, "")
	return x.add(p, history.Fail, history.Acquire, "L", nil, a1, "not acquired")
}

var ghosts = GhostHolds{Bound: 50 * time.Millisecond, Allowance: time.Second, Quorum: 1}

func TestGhostHoldsCleanCyclesAreValid(t *testing.T) {
	var x h
	x.grant(0, "A", 0, ms(0), ms(2)).seen("n1", "A", ms(500), ms(3)).release(0, "A", ms(100), ms(102), history.OK).seen("n1", "", 0, ms(103))
	x.grant(1, "B", 0, ms(110), ms(112)).seen("n1", "B", ms(600), ms(111)).release(1, "B", ms(200), ms(202), history.OK).seen("n1", "", 0, ms(204))
	v := ghosts.Check(sorted(x))
	if v.Valid != Valid || v.Details.GhostKeys != 0 {
		t.Fatalf("want valid with no ghost, got %v %+v %+v", v.Valid, v.Details, v.Anomalies)
	}
}

func TestGhostHoldsCountALostReplyAndFlagOneThatBlocks(t *testing.T) {
	// Process 0's SET took the key, its reply was lost: the key stays for
	// a lease (counted, not an anomaly) ...
	var x h
	x.add(0, history.Invoke, history.Acquire, "L", nil, ms(0), "")
	x.seen("n1", "A", ms(500), ms(5))
	x.add(0, history.Info, history.Acquire, "L", nil, ms(100), "i/o timeout")
	x.refused(1, ms(10), ms(400)).seen("n1", "", 0, ms(510))
	v := ghosts.Check(sorted(x))
	if v.Valid != Valid || v.Details.GhostKeys != 1 || v.Details.LongestGhost != time.Duration(ms(505)) {
		t.Fatalf("a lease-long ghost: want valid with one ghost of 505ms, got %v %+v", v.Valid, v.Details)
	}
	// ... or, with no expiry, for good, refusing everyone.
	var y h
	y.add(0, history.Invoke, history.Acquire, "L", nil, ms(0), "")
	y.seen("n1", "A", 0, ms(5))
	y.add(0, history.Info, history.Acquire, "L", nil, ms(100), "i/o timeout")
	y.refused(1, ms(10), ms(1200)).refused(1, ms(1300), ms(2500))
	v = ghosts.Check(sorted(y))
	if v.Valid != Invalid || v.Counts["ghost-hold"] != 1 {
		t.Fatalf("a key kept for nobody: want a ghost-hold, got %v %+v", v.Valid, v.Anomalies)
	}
}

func TestGhostHoldsNeedAQuorumOfNodes(t *testing.T) {
	// A RedLock try that took one node of three and gave up leaves a key
	// that blocks nobody.
	var y h
	y.seen("n1", "A", 0, ms(5))
	y.refused(1, ms(10), ms(1200)).refused(1, ms(1300), ms(2500))
	g := ghosts
	g.Quorum = 2
	if v := g.Check(sorted(y)); v.Valid != Valid || v.Details.GhostKeys != 0 {
		t.Fatalf("one node of a quorum of two: want no ghost, got %v %+v", v.Valid, v.Details)
	}
}

func TestStolenKeysFlagAnOverwriteOfALiveLease(t *testing.T) {
	var x h
	x.grant(0, "A", ms(1000), ms(0), ms(2)).seen("n1", "A", 0, ms(3))
	x.grant(1, "B", ms(1100), ms(50), ms(100)).seen("n1", "B", 0, ms(101))
	v := StolenKeys{}.Check(sorted(x))
	if v.Valid != Invalid || v.Counts["stolen-key"] != 1 || v.Anomalies[0].Processes[0] != 0 || v.Anomalies[0].Processes[1] != 1 {
		t.Fatalf("want a stolen key from process 0 to 1, got %v %+v", v.Valid, v.Anomalies)
	}
}

func TestStolenKeysAFailedReleaseOfAnotherLeaseExcusesNothing(t *testing.T) {
	// Process 2's release of its own old lease failed (nothing deleted)
	// just as B overwrote A: the overwrite is still a theft.
	var x h
	x.grant(0, "A", ms(1000), ms(0), ms(2)).seen("n1", "A", 0, ms(3))
	x.release(2, "C", ms(30), ms(35), history.Fail)
	x.grant(1, "B", ms(1100), ms(41), ms(45)).seen("n1", "B", 0, ms(46))
	if v := (StolenKeys{}).Check(sorted(x)); v.Counts["stolen-key"] != 1 {
		t.Fatalf("want a stolen key, got %v %+v", v.Valid, v.Anomalies)
	}
}

func TestStolenKeysAReleaseBeforeTheLastReadOfTheOwnerExcusesNothing(t *testing.T) {
	// Process 2 (its own key overwritten earlier) releases with a plain
	// DEL, which may delete whatever it finds, between the read that
	// first found A and the read that found B. Whether it may have
	// removed A depends on when A was last seen.
	run := func(prior int64) Verdict {
		var x h
		x.grant(0, "A", ms(1000), ms(0), ms(2)).seen("n1", "A", 0, ms(3))
		x.release(2, "C", ms(20), ms(25), history.OK)
		x.grant(1, "B", ms(1100), ms(41), ms(45)).seenSince("n1", "B", 0, prior, ms(46))
		return StolenKeys{}.Check(sorted(x))
	}
	if v := run(ms(36)); v.Counts["stolen-key"] != 1 {
		t.Errorf("A still read at 36 ms, after the release returned at 25 ms: want a stolen key, got %v %+v", v.Valid, v.Anomalies)
	}
	if v := run(ms(22)); v.Valid != Valid {
		t.Errorf("A last read at 22 ms, before the release returned at 25 ms: want it excused, got %+v", v.Anomalies)
	}
	if v := run(0); v.Valid != Valid {
		t.Errorf("no earlier read recorded: the release after A's first read must excuse, got %+v", v.Anomalies)
	}
}

func TestStolenKeysExcuseReleaseExpiryFaultAndDeadOwner(t *testing.T) {
	cases := map[string]func(x *h){
		"released": func(x *h) {
			x.grant(0, "A", ms(1000), ms(0), ms(2)).seen("n1", "A", 0, ms(3)).release(0, "A", ms(40), ms(42), history.OK)
			x.grant(1, "B", ms(1100), ms(41), ms(45)).seen("n1", "B", 0, ms(46))
		},
		"expired": func(x *h) {
			x.grant(0, "A", ms(1000), ms(0), ms(2)).seen("n1", "A", ms(40), ms(3))
			x.grant(1, "B", ms(1100), ms(41), ms(45)).seen("n1", "B", ms(90), ms(46))
		},
		"node fault under way": func(x *h) {
			x.grant(0, "A", ms(1000), ms(0), ms(2)).seen("n1", "A", 0, ms(3))
			x.add(history.NemesisProcess, history.Invoke, "evict", "", &history.Value{Site: &history.Site{Node: "n1"}}, ms(20), "")
			x.grant(1, "B", ms(1100), ms(41), ms(45)).seen("n1", "B", 0, ms(46))
			x.add(history.NemesisProcess, history.OK, "evict", "", &history.Value{Site: &history.Site{Node: "n1"}}, ms(60), "")
		},
		"node fault": func(x *h) {
			x.grant(0, "A", ms(1000), ms(0), ms(2)).seen("n1", "A", 0, ms(3))
			x.add(history.NemesisProcess, history.Invoke, "clock-bump", "", &history.Value{Site: &history.Site{Node: "n1"}}, ms(19), "")
			x.add(history.NemesisProcess, history.OK, "clock-bump", "", &history.Value{Site: &history.Site{Node: "n1"}}, ms(20), "")
			x.grant(1, "B", ms(1100), ms(41), ms(45)).seen("n1", "B", 0, ms(46))
		},
		"owner's promise over": func(x *h) {
			x.grant(0, "A", ms(30), ms(0), ms(2)).seen("n1", "A", 0, ms(3))
			x.grant(1, "B", ms(1100), ms(41), ms(45)).seen("n1", "B", 0, ms(46))
		},
		"owner retired": func(x *h) {
			x.grant(0, "A", ms(1000), ms(0), ms(2)).seen("n1", "A", 0, ms(3))
			x.add(0, history.Invoke, history.Write, "R", nil, ms(10), "").add(0, history.Info, history.Write, "R", nil, ms(20), "crashed")
			x.grant(1, "B", ms(1100), ms(41), ms(45)).seen("n1", "B", 0, ms(46))
		},
		"a release long under way": func(x *h) {
			x.release(2, "C", ms(0), ms(300), history.Fail)
			x.grant(0, "A", ms(1000), ms(0), ms(2)).seen("n1", "A", 0, ms(3))
			x.release(3, "D", ms(1), ms(40), history.OK)
			x.grant(1, "B", ms(1100), ms(41), ms(45)).seen("n1", "B", 0, ms(46))
		},
		"a release never answered": func(x *h) {
			x.grant(0, "A", ms(1000), ms(0), ms(2)).seen("n1", "A", 0, ms(3))
			x.add(0, history.Invoke, history.Release, "L", &history.Value{Token: "A"}, ms(10), "")
			x.grant(1, "B", ms(1100), ms(41), ms(45)).seen("n1", "B", 0, ms(46))
		},
		"gone between": func(x *h) {
			x.grant(0, "A", ms(1000), ms(0), ms(2)).seen("n1", "A", 0, ms(3)).seen("n1", "", 0, ms(30))
			x.grant(1, "B", ms(1100), ms(41), ms(45)).seen("n1", "B", 0, ms(46))
		},
	}
	for name, build := range cases {
		var x h
		build(&x)
		if v := (StolenKeys{}).Check(sorted(x)); v.Valid != Valid {
			t.Errorf("%s: want valid, got %+v", name, v.Anomalies)
		}
	}
}

func TestGhostHoldsJudgeEachOwnersKeyOnItsOwn(t *testing.T) {
	// Two clients die holding, one after the other: each key lasts its
	// lease (600 ms), together longer than the allowance (1 s), while
	// process 2 is refused throughout. Two ghosts, no anomaly.
	var x h
	x.grant(0, "A", ms(600), ms(0), ms(2)).seen("n1", "A", ms(600), ms(3))
	x.add(0, history.Invoke, history.Write, "R", nil, ms(10), "").add(0, history.Info, history.Write, "R", nil, ms(20), "crashed")
	x.grant(1, "B", ms(1200), ms(590), ms(605))
	x.add(1, history.Invoke, history.Write, "R", nil, ms(607), "").add(1, history.Info, history.Write, "R", nil, ms(608), "crashed")
	x.seen("n1", "B", ms(1200), ms(612)) // read after B died: A's ghost runs straight into B's
	x.refused(2, ms(610), ms(1100)).refused(2, ms(1110), ms(1190)).seen("n1", "", 0, ms(1210))
	v := ghosts.Check(sorted(x))
	if v.Valid != Valid || v.Details.GhostKeys != 2 {
		t.Fatalf("two dead holders' leases in a row: want two ghosts and no anomaly, got %v %+v %+v", v.Valid, v.Details, v.Anomalies)
	}
}
