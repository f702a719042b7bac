package verdict

import (
	"slices"
	"sort"

	"github.com/locktorture/locktorture/checker"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/lateness"
	"github.com/locktorture/locktorture/locks"
)

// Case is what one run is judged by: everything the judgement needs that
// the history does not hold. A run stored on disk is judged again from its
// history and the Case its scenario and lock give.
type Case struct {
	// Expected is what the lock must show.
	Expected Expectation
	// Checkers judge the history.
	Checkers []checker.Checker
	// Requires and Traffic say what proves the story happened (Vacuity).
	Requires []fault.Evidence
	Traffic  Traffic
	// Limits is how late the harness may run before its verdict is not
	// evidence.
	Limits lateness.Limits
	// Claims, when set, judges an exploration run against the lock's own
	// fault model instead of Expected's outcome.
	Claims *locks.Info
}

// Judgement is a run's verdict and why. Its fields are part of the
// run's results.json.
type Judgement struct {
	Outcome  Outcome           `json:"outcome"`
	Matched  bool              `json:"matched"`
	Verdicts []checker.Verdict `json:"checkers"`
	// Observations are the anomaly kinds and facts the verdicts show.
	Observations []string `json:"observations"`
	// Vacuous says why the story did not happen (a required fault never
	// fired, or too little traffic around it); the outcome is then
	// Vacuous, whatever the checkers found.
	Vacuous string `json:"vacuous,omitempty"`
	// Lateness is how late the harness ran from the run's start on: its
	// timers and a node's replies window by window, and each fault's
	// overrun (read from the history).
	Lateness []lateness.Sample `json:"lateness"`
	// Late says, when the lateness passed a limit, by how much and where,
	// whether or not the verdict rested on it.
	Late string `json:"late,omitempty"`
	// Starved says why the run's verdict is not evidence (see starved); the
	// outcome is then Starved, whatever the checkers found.
	Starved string `json:"starved,omitempty"`
	// Limits is what the lateness was judged by: a lock that bounds its
	// own replies has a tighter Reply.
	Limits lateness.Limits `json:"limits"`
	// Finding (exploration) says how the lock broke its promise under
	// faults it claims to survive; Explained, which unclaimed faults
	// account for a broken promise that is therefore expected.
	Finding   string `json:"finding,omitempty"`
	Explained string `json:"explained,omitempty"`
	// Semantics is the model the lock ops were checked against, which the
	// timeline is drawn with.
	Semantics checker.Semantics `json:"-"`
	// Figures are what the verdict cost, in fractions a person weighs.
	Figures Figures `json:"figures"`
}

// Judge judges the history ops of a run whose clients were all up at
// ready (harness ns; nothing before it is judged for timing) and whose
// probe measured samples. Samples read from the history (a fault's
// overrun) are dropped from samples and read again, so judging a stored
// run again counts them once.
func Judge(c Case, ops []history.Op, ready int64, samples []lateness.Sample) Judgement {
	j, _, _ := judge(c, func(fn func(history.Op)) error {
		for _, op := range ops {
			fn(op)
		}
		return nil
	}, len(ops)+1, ready, samples)
	return j
}

// JudgeStream is Judge on a history read op by op, in recorded order, by
// each (history.Each on a stored run's file): the checkers judge it a
// segment at a time (checker.Stream), and only the nemesis's ops are
// kept, so a run of any length is judged in the memory of a segment. It
// returns the judgement of what was read, the nemesis's ops it kept (what
// a report of the run can still draw) and each's error.
func JudgeStream(c Case, each func(func(history.Op)) error, ready int64, samples []lateness.Sample) (Judgement, []history.Op, error) {
	return judge(c, each, checker.DefaultSegment, ready, samples)
}

// judge reads the history once: the checkers' stream, the traffic around
// the story's fault, and the nemesis's ops, from which everything else is
// judged. A stream of segments no shorter than the history is one
// segment, judged as the checkers judge a whole history.
func judge(c Case, each func(func(history.Op)) error, segment int, ready int64, samples []lateness.Sample) (Judgement, []history.Op, error) {
	var j Judgement
	for _, ch := range c.Checkers {
		if l, ok := ch.(checker.Linearizable); ok {
			j.Semantics = l.Semantics
		}
	}
	stream := checker.NewStream(c.Checkers, segment)
	meter := newTrafficMeter(c.Requires, c.Traffic)
	var nemesis []history.Op
	var last int64
	err := each(func(op history.Op) {
		last = max(last, op.Time)
		stream.Add(op)
		meter.add(op)
		if op.Process == history.NemesisProcess {
			nemesis = append(nemesis, op)
		}
	})
	j.Verdicts = stream.Verdicts()
	j.Figures = figuresOf(j.Verdicts, ready, last)
	j.Outcome = Sum(j.Verdicts)
	j.Observations = Observations(j.Verdicts)
	if j.Vacuous = meter.vacuity(nemesis, showedNothing(c.Expected, j.Outcome, j.Observations)); j.Vacuous != "" {
		j.Outcome = Vacuous
	}
	j.Lateness = append(slices.DeleteFunc(slices.Clone(samples), func(s lateness.Sample) bool { return s.Kind.FromHistory() }),
		lateness.Faults(nemesis, ready, last)...)
	// A starved run's story may not have happened as told, or happened in
	// another order: that, not its vacuity, is what a reader needs to know.
	j.Limits = c.Limits
	j.Late = lateness.Over(j.Lateness, j.Limits)
	passed := j.Outcome == Safe && len(nemesis) == 0 && Matches(c.Expected, j.Outcome, j.Observations)
	if j.Starved = starved(lateness.Unfitted(nemesis), harnessLate(j, c.Expected, nemesis), passed); j.Starved != "" {
		j.Outcome = Starved
	}
	j.Matched = Matches(c.Expected, j.Outcome, j.Observations)
	if c.Claims != nil {
		j.judgeClaims(*c.Claims, nemesis)
	}
	return j, nemesis, err
}

// harnessLate is what of the run's lateness can starve its verdict: the
// harness's own (timers, the store's replies, faults' overruns) always;
// the lock's own server (lateness.Server) where the run showed too little
// traffic (vacuous) or a key nobody could take (deadlock), which a stalled
// server makes by itself, and where, in a story with a fault, it passed or
// showed less than expected (fellShort), in a round trip not yet answered
// when the faults began. A violation seen beside a slow server is
// evidence: a lock must keep its promise however slowly its server
// answers. What the run did not show is not: a story's violation needs a
// waiter to reach the server inside a window (a holder's pause, 0.3 to
// 0.6 of a TTL), and a server that answers nobody for longer shuts the
// waiters out of it, or lets one in only after the holder has written, so
// a lock known to break would pass, or lose no write.
func harnessLate(j Judgement, expected Expectation, nemesis []history.Op) string {
	isServer := func(s lateness.Sample) bool { return s.Kind == lateness.Server }
	switch {
	case j.Outcome == Vacuous || j.Outcome == Deadlock:
		return j.Late
	case len(nemesis) > 0 && (j.Outcome == Safe || fellShort(expected, j.Outcome, j.Observations)):
		// A sample is a round trip from its window's start (At): one sent
		// before the faults and answered after them spans their start.
		from := nemesis[0].Time
		beforeFaults := func(s lateness.Sample) bool { return isServer(s) && s.At+s.Late < from }
		return lateness.Over(slices.DeleteFunc(slices.Clone(j.Lateness), beforeFaults), j.Limits)
	}
	return lateness.Over(slices.DeleteFunc(slices.Clone(j.Lateness), isServer), j.Limits)
}

// fellShort says whether a judged outcome shows less than e expects: a
// less serious outcome (checker.Severities' order, safe last), or the one
// expected without an observation e asks to be shown. An outcome more
// serious than expected is not, nor is an outcome or expectation that
// checker.Severities does not rank (undecided, vacuous, starved, none).
func fellShort(e Expectation, outcome Outcome, observations []string) bool {
	got, ok := severity(outcome)
	want, known := severity(e.Outcome)
	if !ok || !known || Matches(e, outcome, observations) {
		return false
	}
	return got > want || (got == want && slices.ContainsFunc(e.Show, func(o string) bool { return !slices.Contains(observations, o) }))
}

// showedNothing says whether a run fell short of e without a violation
// of its own: it passed, or showed the expected outcome without an
// observation e asks to be shown (Traffic.ContendedIfShort).
func showedNothing(e Expectation, outcome Outcome, observations []string) bool {
	return fellShort(e, outcome, observations) && (outcome == Safe || outcome == e.Outcome)
}

// severity ranks a judged outcome, the most serious first, safe last.
func severity(o Outcome) (int, bool) {
	sev := checker.Severities()
	if o == Safe {
		return len(sev), true
	}
	i := slices.IndexFunc(sev, func(s checker.Severity) bool { return Outcome(s.Outcome) == o })
	return i, i >= 0
}

// starved says why a run's verdict is not evidence, or "" when it is. A
// fault the gate could not fit (unfitted) means the story did not happen as
// told, so nothing the run shows counts. A harness that ran late (late)
// can move a fault's window: a pause that overran, a successor's acquire
// stalled until the sleeper has woken, RedLock replies past its per-node
// timeout that fail the very grant a story needs. So lateness starves a
// violation or a stall it could have made, and a pass it could have
// caused by moving a window. It starves every verdict but one: passed, a
// run in which the nemesis did nothing, every checker passed and the run
// showed what it was expected to. With no fault there is no window to
// move, and a stalled client is not a violation.
func starved(unfitted, late string, passed bool) string {
	switch {
	case unfitted != "" && late != "":
		return unfitted + "; " + late
	case unfitted != "":
		return unfitted
	case late != "" && !passed:
		return late
	}
	return ""
}

// Sum sums verdicts up in the words expectations use: undecided if any
// checker could not decide, else the outcome checker.Severities gives the
// most serious checker that failed (a corrupted resource, then a violated
// lock, then a stuck one, then an unfair one), else safe.
func Sum(vs []checker.Verdict) Outcome {
	if slices.ContainsFunc(vs, func(v checker.Verdict) bool { return v.Valid == checker.Unknown }) {
		return Undecided
	}
	if s, ok := checker.Worst(vs); ok {
		return Outcome(s.Outcome)
	}
	return Safe
}

// Observations lists, sorted, the anomaly kinds the verdicts report,
// StaleWriteRejected when the fenced store refused a write, GhostKey
// when a node held the key for nobody, WriteWithheld when a holder did
// not write because its lock said its lease was lost, and SlotBusy when
// Redis Cluster refused a lock command while its slot moved.
func Observations(vs []checker.Verdict) []string {
	seen := map[string]bool{}
	for _, v := range vs {
		for kind := range v.Counts {
			seen[kind] = true
		}
		if v.Details.StaleWritesRejected > 0 {
			seen[StaleWriteRejected] = true
		}
		if v.Details.GhostKeys > 0 {
			seen[GhostKey] = true
		}
		if v.Details.WritesWithheld > 0 {
			seen[WriteWithheld] = true
		}
		if v.Details.SlotRefusals > 0 {
			seen[SlotBusy] = true
		}
	}
	out := make([]string, 0, len(seen))
	for o := range seen {
		out = append(out, o)
	}
	sort.Strings(out)
	return out
}

// Verdict returns the named checker's verdict.
func (j *Judgement) Verdict(name checker.Name) (checker.Verdict, bool) {
	for _, v := range j.Verdicts {
		if v.Checker == name {
			return v, true
		}
	}
	return checker.Verdict{}, false
}
