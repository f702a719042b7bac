package fault

import (
	"strings"

	"github.com/locktorture/locktorture/history"
)

// Evidence is a nemesis action a story needs to have happened, said in
// the fields of its site: an op of the nemesis that completed ok, with
// every field Evidence sets equal to its site's. A zero field matches
// anything, so {Op: Kill} is any kill and {Op: Kill, Node: "n3"} the kill
// of n3. A story whose evidence is missing did not happen, and its run
// proves nothing either way.
type Evidence struct {
	// Op is the nemesis op.
	Op Op `json:"op"`
	// Node is the node acted on, or the node end of the link.
	Node string `json:"node,omitempty"`
	// Peer is the other end of the link, or the client whose clock moved.
	Peer string `json:"peer,omitempty"`
	// Point is the named point the process stood at ("before-write").
	Point string `json:"point,omitempty"`
	// In is the lock op the process was in (history.Acquire, Release).
	In string `json:"in,omitempty"`
	// Command is the command the process stood at, by its name as sent
	// ("del").
	Command string `json:"command,omitempty"`
	// Reply, when set, asks for a process caught after a command's reply
	// arrived and before the lock saw it.
	Reply bool `json:"reply,omitempty"`
	// Waiting, when set, asks for a process caught waiting inside In.
	Waiting bool `json:"waiting,omitempty"`
}

// Matches reports whether op is this evidence.
func (e Evidence) Matches(op history.Op) bool {
	if op.Process != history.NemesisProcess || op.Type != history.OK || Op(op.F) != e.Op {
		return false
	}
	s := op.Site()
	return same(e.Node, s.Node) && same(e.Peer, s.Peer) && same(e.Point, s.Point) && same(e.In, s.In) && same(e.Command, s.Command) &&
		(!e.Reply || s.Reply) && (!e.Waiting || s.Waiting)
}

// same reports whether a site's field v is what evidence asks for, want
// ("" asks nothing).
func same(want, v string) bool { return want == "" || want == v }

// First is the first op in ops that is this evidence, or nil.
func (e Evidence) First(ops []history.Op) *history.Op {
	for i := range ops {
		if e.Matches(ops[i]) {
			return &ops[i]
		}
	}
	return nil
}

// String says what the evidence asks for, op first, as a run's vacuity
// line names it: "pause at before-write", "crash waiting in acquire".
func (e Evidence) String() string {
	var b strings.Builder
	b.WriteString(string(e.Op))
	if e.Waiting {
		b.WriteString(" waiting")
	}
	if e.Reply {
		b.WriteString(" at a reply")
	}
	if e.Point != "" {
		b.WriteString(" at " + e.Point)
	}
	if e.Command != "" {
		b.WriteString(" at " + strings.ToUpper(e.Command))
	}
	if e.In != "" {
		b.WriteString(" in " + e.In)
	}
	if e.Peer != "" {
		b.WriteString(" of " + e.Peer)
	}
	if e.Node != "" {
		b.WriteString(" on " + e.Node)
	}
	return b.String()
}
