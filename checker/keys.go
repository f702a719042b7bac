package checker

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// Observation is what one lock node held of a key when the observer read
// it (a history.Observe op): the key's owner ("" when it did not exist)
// and the earliest time it expires (0: never), or that the node did not
// answer.
type Observation struct {
	Node, Key, Owner string
	// At is when it was recorded (harness ns), after the read returned.
	At int64
	// Deadline is the harness time before which the key cannot have
	// expired (0: it has no expiry).
	Deadline    int64
	Unreachable bool
	// Prior is when the node's read before this one was sent (0:
	// unknown): what the previous observation recorded still held then.
	Prior int64
}

// present says whether the node is known to hold the key.
func (o Observation) present() bool { return !o.Unreachable && o.Owner != "" }

// ObservationsOf lists the observations in a history, by node, each
// node's in time order.
func ObservationsOf(ops []history.Op) map[string][]Observation {
	out := map[string][]Observation{}
	for _, op := range ops {
		if op.Process != history.ObserverProcess || op.F != history.Observe || op.Value == nil {
			continue
		}
		o := Observation{Node: op.Value.Target, Key: op.Key, Owner: op.Value.Token, At: op.Time,
			Deadline: op.Value.Deadline, Unreachable: op.Error != "", Prior: op.Value.Prior}
		out[o.Node] = append(out[o.Node], o)
	}
	return out
}

// GhostHolds finds ghost holds: spans in which enough lock nodes held the
// key for owners none of whose holders believed they held it. A lost reply
// leaves one (the SET took the key, its client heard an error or nothing),
// so does a crashed holder until its lease runs out, and a watchdog that
// renews for a holder who has given up. A holder believes from its
// acquire's return to its release's call, so the moments between a
// command's effect and its reply are ghosts too, shorter than Bound. Every
// span longer than Bound is counted (Details.GhostKeys); one longer than
// Allowance in which an acquire was refused after the allowance ran out is
// an anomaly: the key blocked others for longer than any lease explains.
// A span is one set of owners': two dead holders' keys one after the other
// are two leases, each judged on its own, not one ghost twice as long.
type GhostHolds struct {
	// Bound is the shortest ghost hold counted: shorter ones are the
	// moment between a command's effect and its reply.
	Bound time.Duration
	// Allowance is the longest a ghost may block others (the liveness
	// checker's allowance: a dead holder's lease and a retry).
	Allowance time.Duration
	// Quorum is how many nodes must hold the key for it to block a client
	// (the nodes a RedLock client cannot do without; 1 for a single node
	// and its replica).
	Quorum int
}

// Name is GhostHoldsName.
func (GhostHolds) Name() Name { return GhostHoldsName }

// Check reports ghost holds.
func (g GhostHolds) Check(ops []history.Op) Verdict {
	v := Verdict{Checker: GhostHoldsName, Valid: Valid, Details: Details{Allowance: g.Allowance}}
	byNode := ObservationsOf(ops)
	if len(byNode) == 0 || len(ops) == 0 {
		v.Details.Note = "no observations of the nodes: nothing to check"
		return v
	}
	end := ops[len(ops)-1].Time
	quorum := max(g.Quorum, 1)
	belief := beliefs(ops, end)
	refusals := map[string][]int64{} // key → when its refused acquires returned
	for _, p := range history.Pairs(ops) {
		if p.Invoke.F == history.Acquire && p.Completion != nil && p.Completion.Type == history.Fail {
			refusals[p.Invoke.Key] = append(refusals[p.Invoke.Key], p.Completion.Time)
		}
	}
	for _, key := range observedKeys(byNode) {
		var times []int64
		var nodes [][]Observation
		for _, node := range slices.Sorted(maps.Keys(byNode)) {
			var mine []Observation
			for _, o := range byNode[node] {
				if o.Key == key {
					mine = append(mine, o)
					times = append(times, o.At)
				}
			}
			nodes = append(nodes, mine)
		}
		for _, bs := range belief[key] {
			for _, b := range bs.spans {
				times = append(times, b.start, b.end)
			}
		}
		slices.Sort(times)
		times = slices.Compact(times)
		fails := refusals[key]
		slices.Sort(fails)
		at := make([]int, len(nodes)) // each node's observation in force
		for i := range at {
			at[i] = -1
		}
		var ghostFrom int64 = -1
		var ghostOf string // the owners of the ghost in progress
		for _, t := range times {
			unowned := 0
			var owners []string
			for n, obs := range nodes {
				for at[n]+1 < len(obs) && obs[at[n]+1].At <= t {
					at[n]++
				}
				if at[n] >= 0 && obs[at[n]].present() && !belief[key][obs[at[n]].Owner].at(t) {
					unowned++
					owners = append(owners, obs[at[n]].Owner)
				}
			}
			ghost := unowned >= quorum
			slices.Sort(owners)
			of := strings.Join(slices.Compact(owners), " ")
			if ghostFrom >= 0 && (!ghost || of != ghostOf) {
				g.ghost(&v, key, ghostFrom, t, fails)
				ghostFrom = -1
			}
			if ghost && ghostFrom < 0 {
				ghostFrom, ghostOf = t, of
			}
		}
		if ghostFrom >= 0 {
			g.ghost(&v, key, ghostFrom, end, fails)
		}
	}
	return v
}

// ghost counts one ghost span and reports it when it blocked others past
// the allowance.
func (g GhostHolds) ghost(v *Verdict, key string, from, to int64, fails []int64) {
	d := to - from
	if d <= int64(g.Bound) {
		return
	}
	v.Details.GhostKeys++
	v.Details.LongestGhost = max(v.Details.LongestGhost, time.Duration(d))
	allow := int64(g.Allowance)
	f := sort.Search(len(fails), func(j int) bool { return fails[j] > from+allow })
	if d <= allow || f == len(fails) || fails[f] > to {
		return
	}
	v.add(Anomaly{Kind: "ghost-hold", Key: key, Start: from, End: to,
		Text: fmt.Sprintf("the nodes held %q from %s to %s (%s) for owners no client believed it was, and refused others past the allowance %s",
			key, seconds(from), seconds(to), span(d), g.Allowance)})
}

// observedKeys lists the keys the observations name, sorted.
func observedKeys(byNode map[string][]Observation) []string {
	keys := map[string]bool{}
	for _, obs := range byNode {
		for _, o := range obs {
			keys[o.Key] = true
		}
	}
	return slices.Sorted(maps.Keys(keys))
}

// beliefs are, by key and lease token, the spans in which the process
// granted that token believed it held the key: the hold its acquire
// returned into (a reentrant holder's hold spans every entry).
func beliefs(ops []history.Op, end int64) map[string]map[string]believed {
	spans := map[string]map[string][]busy{}
	hs, _ := holdsOf(ops)
	for _, h := range hs {
		e := h.End
		if h.Open {
			e = end
		}
		for _, l := range h.leases {
			if l.token == "" {
				continue
			}
			if spans[h.Key] == nil {
				spans[h.Key] = map[string][]busy{}
			}
			spans[h.Key][l.token] = append(spans[h.Key][l.token], busy{start: h.Start, end: e})
		}
	}
	out := map[string]map[string]believed{}
	for key, byToken := range spans {
		out[key] = map[string]believed{}
		for token, bs := range byToken {
			slices.SortFunc(bs, func(a, b busy) int { return cmp.Compare(a.start, b.start) })
			reach := make([]int64, len(bs))
			for i, b := range bs {
				reach[i] = b.end
				if i > 0 {
					reach[i] = max(reach[i], reach[i-1])
				}
			}
			out[key][token] = believed{bs, reach}
		}
	}
	return out
}

// believed are one token's belief spans, sorted by start, each with the
// latest end of it and the spans before it (reach): whether any covers a
// moment is one search, not a walk of every hold a Redisson-style owner
// token (one per process) was granted.
type believed struct {
	spans []busy
	reach []int64
}

// at says whether one of the spans covers t (from its start, up to and
// excluding its end).
func (b believed) at(t int64) bool {
	i := sort.Search(len(b.spans), func(i int) bool { return b.spans[i].start > t }) - 1
	return i >= 0 && b.reach[i] > t
}

// StolenKeys finds keys taken from a live owner: a node held the key for
// one lease, and next for another, with nothing between the last read
// that found the first and the read that found the second that could
// have removed the first: no read that found the key gone, no release of
// the first lease (nor any release that deleted something), no expiry of
// the first (its earliest deadline still ahead), no fault on that node,
// while the first lease's holder still believed it and its promise ran.
// Only an overwrite does that: a renewal or a retry that SET someone
// else's key, a GETSET on a clock that ran ahead. A correct lock never
// shows one, whatever its clients believed.
type StolenKeys struct{}

// Name is StolenKeysName.
func (StolenKeys) Name() Name { return StolenKeysName }

// Check reports stolen keys.
func (StolenKeys) Check(ops []history.Op) Verdict {
	v := Verdict{Checker: StolenKeysName, Valid: Valid}
	byNode := ObservationsOf(ops)
	if len(byNode) == 0 {
		v.Details.Note = "no observations of the nodes: nothing to check"
		return v
	}
	w := theft{grants: grantsOf(ops), releases: indexReleases(ops), faults: nodeFaults(ops)}
	for _, node := range slices.Sorted(maps.Keys(byNode)) {
		obs := byNode[node]
		for i := 0; i+1 < len(obs); i++ {
			a, b := obs[i], obs[i+1]
			if pa, ok := w.stolen(node, a, b); ok {
				pb := w.grants.holder(b.Owner)
				v.Details.StolenKeys++
				v.add(Anomaly{Kind: "stolen-key", Key: a.Key, Processes: []int{pa, pb}, Start: a.At, End: b.At,
					Text: fmt.Sprintf("%s's %q went from process %d's live lease to %s between %s and %s, with no release, expiry or fault between",
						node, a.Key, pa, processWord(pb), seconds(a.At), seconds(b.At))})
			}
		}
	}
	return v
}

// theft is what tells whether a change of a key's owner on a node was a
// theft: the leases granted, the releases and the faults on nodes.
type theft struct {
	grants   tokenGrants
	releases releaseIndex
	faults   []history.Pair
}

// stolen says whether a node's key went from a's owner to b's, two
// observations one after the other, while a's owner's lease was live and
// nothing but an overwrite could have removed it; if so it returns the
// process that held that lease.
func (w theft) stolen(node string, a, b Observation) (int, bool) {
	if !a.present() || !b.present() || a.Owner == b.Owner || a.Key != b.Key {
		return -1, false
	}
	if a.Deadline != 0 && a.Deadline <= b.At {
		return -1, false // a may have expired
	}
	// The key was a's until the read before b was sent; what removed it
	// came later. Without that read, a's own is the last known.
	from := a.At
	if b.Prior > 0 {
		from = b.Prior
	}
	if faultOn(w.faults, node, from, b.At) || w.releases.between(a.Key, a.Owner, from, b.At) {
		return -1, false
	}
	pa := w.grants.live(a.Key, a.Owner, b.At)
	return pa, pa >= 0
}

// grant is one acquire that returned a lease token, and the hold it began
// or entered.
type grant struct {
	hold  *hold
	lease lease
}

// tokenGrants are, by lease token, the acquires that returned it.
type tokenGrants map[string][]grant

// grantsOf lists the acquires of ops that returned a token, by token.
func grantsOf(ops []history.Op) tokenGrants {
	grants := tokenGrants{}
	hs, _ := holdsOf(ops)
	for i := range hs {
		for _, l := range hs[i].leases {
			if l.token != "" {
				grants[l.token] = append(grants[l.token], grant{&hs[i], l})
			}
		}
	}
	return grants
}

// live is the process that held key under token at t with its promise
// still running, or -1.
func (gs tokenGrants) live(key, token string, t int64) int {
	for _, g := range gs[token] {
		h, l := g.hold, g.lease
		if h.Key == key && l.at <= t && (l.deadline == 0 || l.deadline > t) && (t < h.End || h.Open) {
			return h.Process
		}
	}
	return -1
}

// holder is the process first granted token, or -1.
func (gs tokenGrants) holder(token string) int {
	if g := gs[token]; len(g) > 0 {
		return g[0].hold.Process
	}
	return -1
}

// nodeFaults lists the nemesis's actions on lock nodes, each with its
// completion (if any).
func nodeFaults(ops []history.Op) []history.Pair {
	var faults []history.Pair
	for _, p := range history.Pairs(ops) {
		if inv := p.Invoke; inv.Process == history.NemesisProcess && inv.Value != nil && inv.Value.Site != nil {
			if _, ok := fault.Lookup(fault.Op(inv.F)); ok {
				faults = append(faults, p)
			}
		}
	}
	return faults
}

// faultOn says whether a fault may have acted on node between from and
// to. A fault acts anywhere from its invocation to its completion (an
// eviction takes the key while the node fills), and one that failed may
// have acted too.
func faultOn(faults []history.Pair, node string, from, to int64) bool {
	return slices.ContainsFunc(faults, func(p history.Pair) bool {
		s := p.Invoke.Value.Site
		return p.Invoke.Time <= to && (p.Completion == nil || p.Completion.Time > from) && (s.Node == node || s.All)
	})
}

// releaseIndex holds a history's releases by key, in the order they were
// invoked, so that asking whether one could have removed a key between two
// observations is a search, not a walk of every release: a StolenKeys check
// asks at every change of owner, and an hour-long run has hundreds of
// thousands of both.
type releaseIndex struct {
	done map[string][]history.Pair // completed, by invocation time
	// longest is the longest any completed release took: none invoked
	// earlier than that before a moment can have completed after it.
	longest int64
	open    map[string]int64 // the earliest invocation of a release that never completed
}

func indexReleases(ops []history.Op) releaseIndex {
	r := releaseIndex{done: map[string][]history.Pair{}, open: map[string]int64{}}
	for _, p := range history.Pairs(ops) {
		inv := p.Invoke
		if inv.F != history.Release || inv.Process < 0 {
			continue
		}
		if p.Completion == nil {
			if t, ok := r.open[inv.Key]; !ok || inv.Time < t {
				r.open[inv.Key] = inv.Time
			}
			continue
		}
		r.done[inv.Key] = append(r.done[inv.Key], p)
		r.longest = max(r.longest, p.Completion.Time-inv.Time)
	}
	for _, ps := range r.done {
		slices.SortStableFunc(ps, func(a, b history.Pair) int { return cmp.Compare(a.Invoke.Time, b.Invoke.Time) })
	}
	return r
}

// between says whether a release could have removed owner's key between
// from and to: one invoked by to and not over before from that was
// owner's own, or that did not fail (it may have deleted whatever it
// found), or whose outcome is unknown.
func (r releaseIndex) between(key, owner string, from, to int64) bool {
	if t, ok := r.open[key]; ok && t <= to {
		return true
	}
	ps := r.done[key]
	i := sort.Search(len(ps), func(i int) bool { return ps[i].Invoke.Time > to })
	for j := i - 1; j >= 0 && ps[j].Invoke.Time >= from-r.longest; j-- {
		inv, c := ps[j].Invoke, ps[j].Completion
		if c.Time < from {
			continue
		}
		if (inv.Value != nil && inv.Value.Token == owner) || c.Type != history.Fail {
			return true
		}
	}
	return false
}

func processWord(p int) string {
	if p < 0 {
		return "a lease no client was granted"
	}
	return fmt.Sprintf("process %d's", p)
}
