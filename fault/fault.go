// Package fault is the vocabulary of the nemesis: one table of every op
// the nemesis records in a history, saying for each what kind of fault it
// is in a lock's fault model, what op ends it, how it is drawn and what a
// person calls it. The nemesis records these ops; reports, the judge of a
// lock's claims and stories' evidence read them; all of them spell an op
// through this table, so what an op means is said here alone.
//
// Adding a fault kind touches three places: its ops (and its Kind, if it
// is a new kind) and their rows here; the nemesis code that carries it
// out and records them (package nemesis, and package cluster where the
// servers must do something new: cluster.Server); and its entry in
// package scenario, in the faults_*.go of its family, which names the ops
// and holds the plan action that does the fault (named as its op), its
// help, its undo, and what random exploration draws of it or why it draws
// none. Package scenario's tests fail while an op here that carries out a
// fault has no action, or a kind is neither drawn nor said why not. A
// lock that claims to survive the kind names it in its claims
// (locks.Info.Claims).
package fault

import (
	"encoding/json"
	"slices"

	"github.com/locktorture/locktorture/history"
)

// Op is a nemesis op's name as the history records it (history.Op.F).
type Op string

// Every op the nemesis records.
const (
	// PartitionStart cuts the links of a grudge (Site.Cut), or one
	// direction of one link (Site.Peer, Node, Direction).
	PartitionStart Op = "partition-start"
	// PartitionEnd heals every link (Site.All): no cut, no latency.
	PartitionEnd Op = "partition-end"
	// LatencyStart delays a link (Site.Peer to Site.Node; no peer: every
	// link of the node) by Value.Duration, or one direction of it.
	LatencyStart Op = "latency-start"
	// LatencyEnd removes a link's delay.
	LatencyEnd Op = "latency-end"
	// PauseNode stops a node's process (SIGSTOP); its keys stay.
	PauseNode Op = "node-pause"
	// ResumeNode continues a paused node.
	ResumeNode Op = "node-resume"
	// Kill is kill -9 on a node's process.
	Kill Op = "kill"
	// PowerLoss is kill -9 plus the loss of what the node's disk had not
	// synced.
	PowerLoss Op = "power-loss"
	// Restart starts a killed node again, after Value.Duration.
	Restart Op = "restart"
	// Promote makes a replica (Site.Node) the master.
	Promote Op = "promote"
	// ClockBump sets a node's clock Value.Duration off the machine's; 0
	// puts it back.
	ClockBump Op = "clock-bump"
	// ClockReset puts every node's clock back (Site.All).
	ClockReset Op = "clock-reset"
	// ClockStrobeStart begins flipping a node's clock for
	// Value.Duration; every flip is a ClockBump of its own.
	ClockStrobeStart Op = "clock-strobe-start"
	// ClockStrobeEnd is the end of a strobe.
	ClockStrobeEnd Op = "clock-strobe-end"
	// ClockSkew sets a client's clock (Site.Peer) Value.Duration off the
	// machine's; 0 puts it back.
	ClockSkew Op = "clock-skew"
	// Pause stops a client whole, every connection and its watchdog
	// with it, for Value.Duration.
	Pause Op = "pause"
	// Stall stops only the goroutine at the site, for Value.Duration:
	// slow work while the rest of the client lives.
	Stall Op = "stall"
	// Resume ends a pause or a stall.
	Resume Op = "resume"
	// Crash kills a client's process: its connections close, none opens
	// again.
	Crash Op = "crash"
	// Evict fills a node's memory past its maxmemory with keys of no
	// expiry and frees them again: whatever its eviction policy picks is
	// gone (Value.Target says how many keys it evicted).
	Evict Op = "evict"
	// SaveFail makes a node's background save fail: a node with save
	// points then refuses every write (MISCONF) until a save succeeds.
	SaveFail Op = "save-fail"
	// SaveMend is a background save that succeeds: the node takes
	// writes again.
	SaveMend Op = "save-mend"
	// Cancel cancels the context of the lock op a client's process is in,
	// as a caller that gives up does (a request's deadline, a shutdown,
	// Java's interrupt): at a command's reply the command fails with the
	// context's error though it ran.
	Cancel Op = "cancel"
	// MigrateStart begins moving a Redis Cluster hash slot to another
	// master (SETSLOT IMPORTING, then MIGRATING): the source sends a
	// client asking for a key it does not have to the target (ASK).
	MigrateStart Op = "migrate-start"
	// MigrateEnd moves the slot's keys left on the source (MIGRATE) and
	// hands the slot to the target (SETSLOT NODE): the source now sends
	// every client there (MOVED). Value.Target says how many keys moved.
	MigrateEnd Op = "migrate-end"
	// Starved notes that the story did not happen as told: a pause the
	// gate could not fit where its story needs it, a holder the trap's
	// actions kept past its point in its lease, a failover or an election
	// later than the story allows. A word on the run, not a fault.
	Starved Op = "starved"
)

// Kind is a kind of fault a lock may claim to survive: its fault model.
// Random exploration judges a lock against its own claims, not against
// "safe under everything": a broken promise under a claimed fault is a
// finding, one under a fault the lock makes no claim about is expected.
// Several ops can be one kind (a kill and a power loss both crash a node).
type Kind string

// The kinds of fault, each carried out by the ops the table gives it.
const (
	// Partition: links between clients and nodes cut, in Jepsen's shapes.
	Partition Kind = "partition"
	// Latency: a link slowed.
	Latency Kind = "latency"
	// NodePause: a node stopped (SIGSTOP) and resumed with its keys.
	NodePause Kind = "node-pause"
	// NodeCrash: a node killed and restarted without persistence: its keys
	// are gone.
	NodeCrash Kind = "node-crash"
	// NodeClock: a node's wall clock moved, so its keys expire early or late.
	NodeClock Kind = "node-clock"
	// ClientPause: a client stopped whole (GC pause), at a point or a
	// command boundary, for longer than the TTL.
	ClientPause Kind = "client-pause"
	// ClientCrash: a client's process killed mid-op.
	ClientCrash Kind = "client-crash"
	// ClientClock: a client's wall clock skewed.
	ClientClock Kind = "client-clock"
	// Failover: a replica promoted in the master's place.
	Failover Kind = "failover"
	// Eviction: a node out of memory evicting keys by its policy.
	Eviction Kind = "eviction"
	// DiskError: a node's save failed, so it refuses writes, releases and
	// renewals included (MISCONF).
	DiskError Kind = "disk-error"
	// CallerCancel: a caller gave up on a lock op midway, its context
	// cancelled just as Redis answered the command that took the lock.
	CallerCancel Kind = "caller-cancel"
	// SlotMigration: a Redis Cluster slot moved between masters while
	// clients use its keys, redirected by ASK and MOVED.
	SlotMigration Kind = "slot-migration"
)

// Kinds lists every kind, in the order reports show them.
var Kinds = []Kind{Partition, Latency, NodePause, NodeCrash, NodeClock, ClientPause, ClientCrash, ClientClock, Failover, Eviction, DiskError, CallerCancel, SlotMigration}

// Shape is how an op lasts, which is how a report draws it and pairs it
// with the op that ends it.
type Shape string

// The shapes.
const (
	// Interval lasts from the op to its End op at the same site (or to an
	// End op on every site, Site.All), or to the end of the run.
	Interval Shape = "interval"
	// Span lasts Value.Duration from the op, as planned; its End op is
	// recorded when it was actually over.
	Span Shape = "span"
	// Offset moves a clock by Value.Duration: it holds until the next op
	// of its own at the same site, or its End op; a zero Duration puts
	// the clock back.
	Offset Shape = "offset"
	// Instant is over as it happens.
	Instant Shape = "instant"
	// End ends the ops whose End it is (and its AlsoEnds): not a fault
	// of its own.
	End Shape = "end"
	// Note is a word on the run in the nemesis's place: no fault.
	Note Shape = "note"
)

// Spec is what the table says of one op.
type Spec struct {
	// Op is the op's name in the history.
	Op Op
	// Label is what a person calls the fault in reports ("partition",
	// "node pause").
	Label string
	// Kind is the kind of fault the op carries out, in the lock fault
	// model's words; empty for an op that carries out none (End, Note).
	Kind Kind
	// Shape is how the op lasts.
	Shape Shape
	// End is the op that ends this one, if one does.
	End Op
	// AlsoEnds lists, for an End op, ops it ends besides those whose End
	// it is: a heal restores every link, delays included.
	AlsoEnds []Op
}

// table is the vocabulary, in the order Ops lists it. The plan action
// that records each op is in package scenario (ActionKind.Ops).
var table = []Spec{
	{Op: PartitionStart, Label: "partition", Kind: Partition, Shape: Interval, End: PartitionEnd},
	{Op: PartitionEnd, Label: "heal", Shape: End, AlsoEnds: []Op{LatencyStart}},
	{Op: LatencyStart, Label: "latency", Kind: Latency, Shape: Interval, End: LatencyEnd},
	{Op: LatencyEnd, Label: "latency removed", Shape: End},
	{Op: PauseNode, Label: "node pause", Kind: NodePause, Shape: Interval, End: ResumeNode},
	{Op: ResumeNode, Label: "node resume", Shape: End},
	{Op: Kill, Label: "kill", Kind: NodeCrash, Shape: Interval, End: Restart},
	{Op: PowerLoss, Label: "power-loss", Kind: NodeCrash, Shape: Interval, End: Restart},
	{Op: Restart, Label: "restart", Shape: End},
	{Op: Promote, Label: "promote", Kind: Failover, Shape: Instant},
	{Op: ClockBump, Label: "clock", Kind: NodeClock, Shape: Offset, End: ClockReset},
	{Op: ClockReset, Label: "clock reset", Shape: End},
	{Op: ClockStrobeStart, Label: "clock strobe", Kind: NodeClock, Shape: Interval, End: ClockStrobeEnd},
	{Op: ClockStrobeEnd, Label: "clock strobe end", Shape: End},
	{Op: ClockSkew, Label: "client clock", Kind: ClientClock, Shape: Offset},
	{Op: Pause, Label: "pause", Kind: ClientPause, Shape: Span, End: Resume},
	{Op: Stall, Label: "stall", Kind: ClientPause, Shape: Span, End: Resume},
	{Op: Resume, Label: "resume", Shape: End},
	{Op: Crash, Label: "crash", Kind: ClientCrash, Shape: Instant},
	{Op: Evict, Label: "eviction", Kind: Eviction, Shape: Instant},
	{Op: SaveFail, Label: "save failed", Kind: DiskError, Shape: Interval, End: SaveMend},
	{Op: SaveMend, Label: "save mended", Shape: End},
	{Op: Cancel, Label: "op cancelled", Kind: CallerCancel, Shape: Instant},
	{Op: MigrateStart, Label: "slot migration", Kind: SlotMigration, Shape: Interval, End: MigrateEnd},
	{Op: MigrateEnd, Label: "slot handed over", Shape: End},
	{Op: Starved, Label: "starved", Shape: Note},
}

// byOp indexes the table, for the lookups a report makes per op.
var byOp = func() map[Op]Spec {
	m := make(map[Op]Spec, len(table))
	for _, s := range table {
		m[s.Op] = s
	}
	return m
}()

// Lookup is what the table says of op, and false for an op it does not
// know (one recorded by an older harness).
func Lookup(op Op) (Spec, bool) {
	s, ok := byOp[op]
	s.AlsoEnds = slices.Clone(s.AlsoEnds)
	return s, ok
}

// KindOf is the kind of fault op carries out, and false for an op that
// carries out none (an end, a note, an unknown op).
func KindOf(op Op) (Kind, bool) {
	s := byOp[op]
	return s.Kind, s.Kind != ""
}

// Ops lists every op in the table.
func Ops() []Op {
	out := make([]Op, len(table))
	for i, s := range table {
		out[i] = s.Op
	}
	return out
}

// EndedBy lists the ops end ends: those whose End it is, then its
// AlsoEnds; none for an op that is not an End.
func EndedBy(end Op) []Op {
	var out []Op
	for _, s := range table {
		if s.End == end && end != "" {
			out = append(out, s.Op)
		}
	}
	return append(out, byOp[end].AlsoEnds...)
}

// KindsIn lists the kinds of fault the nemesis carried out in ops (its
// ops that completed ok), in the order of Kinds: what a random run is
// judged under against a lock's claims.
func KindsIn(ops []history.Op) []Kind {
	seen := map[Kind]bool{}
	for _, op := range ops {
		if op.Process != history.NemesisProcess || op.Type != history.OK {
			continue
		}
		if k, ok := KindOf(Op(op.F)); ok {
			seen[k] = true
		}
	}
	var out []Kind
	for _, k := range Kinds {
		if seen[k] {
			out = append(out, k)
		}
	}
	return out
}

// Place is what a nemesis op acted on, as a key that pairs a fault with
// its end: the op's site, less the direction of a link (how the link is
// cut or slowed, not which link). An op recorded before sites has none
// (""): the faults of such a history pair by op alone, right wherever one
// fault of an op is on at a time.
func Place(op history.Op) string {
	if op.Value == nil || op.Value.Site == nil {
		return ""
	}
	s := *op.Value.Site
	s.Direction = ""
	b, err := json.Marshal(s)
	if err != nil {
		return "" // a Site always encodes: strings, numbers, a map of strings
	}
	return string(b)
}

// Settled says whether every fault in ops has ended (an interval or a span
// by its End op, a clock's offset by its reset), and when the latest fault
// op of any shape was recorded (0: none); notes and ops that failed are
// no faults. A run whose faults have settled
// is over once the checkers' allowance has passed since (engine).
func Settled(ops []history.Op) (last int64, settled bool) {
	type key struct {
		op    Op
		place string
	}
	open := map[key]bool{}
	for _, op := range ops {
		if op.Process != history.NemesisProcess || op.Type != history.OK {
			continue
		}
		f := Op(op.F)
		spec, known := byOp[f]
		if spec.Shape == Note {
			continue
		}
		last = op.Time
		k := key{f, Place(op)}
		switch {
		case !known || spec.Shape == Instant:
		case spec.Shape == End:
			for _, started := range EndedBy(f) {
				for o := range open {
					if o.op == started && (o.place == k.place || op.Site().All) {
						delete(open, o)
					}
				}
			}
		case spec.Shape == Offset && (op.Value == nil || op.Value.Duration == 0):
			delete(open, k)
		default: // an interval, a span, a clock off its time
			open[k] = true
		}
	}
	return last, len(open) == 0
}
