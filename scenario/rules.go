package scenario

import (
	"maps"
	"slices"
	"strings"

	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/verdict"
)

// Rule is one line of a story's expectations: the locks it picks by what
// they are, and what those must show in the story, or why the story
// leaves them out. A story's rules are read in order and the first that
// picks a lock decides for it, so a per-lock override stands before the
// rule of its kind, with its why.
type Rule struct {
	// Locks picks the locks the rule is for.
	Locks Match
	// Expect is what they must show; zero when Skip is set.
	Expect verdict.Expectation
	// Skip, when set, says why the story leaves them out.
	Skip string
}

// Match picks locks by their traits (locks.Info): what a rule is for.
type Match struct {
	// Says names what it picks, for -list and the docs.
	Says string
	pick func(locks.Info) bool
}

// Picks says whether m picks the lock info describes.
func (m Match) Picks(info locks.Info) bool { return m.pick != nil && m.pick(info) }

// String is what m picks.
func (m Match) String() string { return m.Says }

// NewMatch picks the locks for which pick holds; says names them, for
// the docs and -list. A story of a user's own writes its rules with it.
func NewMatch(says string, pick func(locks.Info) bool) Match { return is(says, pick) }

// is picks the locks for which pick holds; says names them.
func is(says string, pick func(locks.Info) bool) Match { return Match{Says: says, pick: pick} }

// lock picks one lock by name: an override, where the lock's documented
// behaviour differs from what its traits would make the rule of its kind
// say.
func lock(name string) Match {
	return is(name, func(i locks.Info) bool { return i.Name == name })
}

// and picks the locks every one of ms picks.
func and(ms ...Match) Match {
	return is(saysOf(ms, ", "), func(i locks.Info) bool {
		return !slices.ContainsFunc(ms, func(m Match) bool { return !m.Picks(i) })
	})
}

// or picks the locks any one of ms picks.
func or(ms ...Match) Match {
	return is(saysOf(ms, " or "), func(i locks.Info) bool {
		return slices.ContainsFunc(ms, func(m Match) bool { return m.Picks(i) })
	})
}

// saysOf is what ms pick, joined by sep.
func saysOf(ms []Match, sep string) string {
	says := make([]string, len(ms))
	for i, m := range ms {
		says[i] = m.Says
	}
	return strings.Join(says, sep)
}

// not picks the locks m does not.
func not(m Match) Match {
	return is("not "+m.Says, func(i locks.Info) bool { return !m.Picks(i) })
}

// expect is the rule that the locks m picks must show e.
func expect(m Match, e verdict.Expectation) Rule { return Rule{Locks: m, Expect: e} }

// leaveOut is the rule that the story leaves the locks m picks out, and
// why.
func leaveOut(m Match, why string) Rule { return Rule{Locks: m, Skip: why} }

// Judgement is what a story's rules say of one lock: an expectation, or
// why the story leaves it out, or neither (Unjudged).
type Judgement struct {
	Expect  *verdict.Expectation
	Skipped string
	// By is what the deciding rule picks ("" when none decided).
	By string
	// ForKind is true when the story left the lock out for its server
	// kind (NotFor), not by a rule.
	ForKind bool
}

// Unjudged is true when no rule and no NotFor line said anything of the
// lock: the story needs a word about it.
func (j Judgement) Unjudged() bool { return j.Expect == nil && j.Skipped == "" }

// Judge is what s says of the lock info describes: its NotFor line for
// the lock's server kind, else its rules in order.
func (s Scenario) Judge(info locks.Info) Judgement {
	if why := s.NotFor[info.ServerKind()]; why != "" {
		return Judgement{Skipped: why, By: info.ServerKind(), ForKind: true}
	}
	for _, r := range s.Rules {
		if !r.Locks.Picks(info) {
			continue
		}
		if r.Skip != "" {
			return Judgement{Skipped: r.Skip, By: r.Locks.Says}
		}
		e := r.Expect
		return Judgement{Expect: &e, By: r.Locks.Says}
	}
	return Judgement{}
}

// expectations is the Expect table s's rules give the registered locks.
func (s Scenario) expectations() map[string]verdict.Expectation {
	out := map[string]verdict.Expectation{}
	for _, name := range locks.Names() {
		info, _ := locks.Lookup(name)
		if j := s.Judge(info); j.Expect != nil {
			out[name] = *j.Expect
		}
	}
	return out
}

// Unjudged lists, for every built-in story that tells (not explores), the
// registered locks it has no word about: neither an expectation nor a
// reason to leave them out, as "story/lock". A lock added with its
// traits is judged by the rules its traits meet; the stories this names
// still need a rule, an override or a reason.
func Unjudged() []string {
	cat := catalogue()
	var out []string
	for _, l := range locks.Names() {
		info, _ := locks.Lookup(l)
		for _, story := range unjudgedBy(cat, info) {
			out = append(out, story+"/"+l)
		}
	}
	return out
}

// UnjudgedBy lists the built-in stories that tell (not explore) and have
// no word about the lock info describes, registered or not.
func UnjudgedBy(info locks.Info) []string { return unjudgedBy(catalogue(), info) }

// unjudgedBy is UnjudgedBy over the catalogue cat, sorted by story.
func unjudgedBy(cat map[string]Scenario, info locks.Info) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(cat)) {
		if s := cat[name]; !s.Exploration && s.Judge(info).Unjudged() {
			out = append(out, name)
		}
	}
	return out
}
