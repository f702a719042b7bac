package scenario

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locktorture/locktorture/nemesis"
)

// Plan is a story's schedule as data: the faults and traps it sets, each
// at a time told in TTLs. A plan prints (-print-scenario), is read back
// from a scenario file, and compiles to the nemesis.Schedule a run
// carries out (Plan.Schedule), so a built-in story and its file are one
// schedule. Every action it can take is an entry of a faults_*.go file,
// one per family of faults (actions.go lists them).
type Plan []Step

// Step is one line of a plan: an action taken At TTLs after the run starts.
// Steps at 0 are the story's setting, in place before any client moves.
type Step struct {
	At Num `json:"at"`
	// Until, when set, undoes the action at this many TTLs after the run
	// starts (its ActionKind.Undo: a partition healed, a paused node
	// resumed, a killed one restarted, a trap disarmed), as a random
	// schedule's faults end.
	Until Num `json:"until,omitzero"`
	Action
}

// Action is one thing the nemesis does. Do names it, by the name it goes
// by or an old one (ActionKind.Aliases; -list shows them); the other
// fields are its arguments, each read only by the actions that say so.
type Action struct {
	Do string `json:"do"`
	// Node is the node acted on: a lock node's name (n1), "store", or
	// one named by its role (see NodeRoles).
	Node string `json:"node,omitempty"`
	// Client is the client acted on: its index, or, inside a trap's then
	// and wake, "caught" (the client the trap caught) or "other" (the
	// client after it).
	Client string `json:"client,omitempty"`
	// Cuts are a partition's: which peers lose which nodes.
	Cuts []Cut `json:"cuts,omitempty"`
	// Direction limits a link fault to one way: "upstream" (what the peer
	// sends) or "downstream" (what it hears); empty, both.
	Direction string `json:"direction,omitempty"`
	// By is how far a clock moves, For how long a fault lasts (a link's
	// delay, how long a waiter has waited; for restart-ensemble, how long
	// until the ensemble is to serve), Jitter how much a delay varies:
	// each in TTLs.
	By     Num `json:"by,omitzero"`
	For    Num `json:"for,omitzero"`
	Jitter Num `json:"jitter,omitzero"`
	// Delay, inside a trap's then or wake, takes the action this many TTLs
	// later, while the trap goes on: a node restarted after a while, a
	// save mended once the story has shown its failure.
	Delay Num `json:"delay,omitzero"`
	// Trap is what "arm" sets.
	Trap *Trap `json:"trap,omitempty"`
	// Then is what "when-acquiring" does.
	Then []Action `json:"then,omitempty"`
}

// Cut is one line of a partition: From loses Nodes.
type Cut struct {
	// From is a peer: "client N" (N also caught or other, inside a trap),
	// "every client", or "replication of NODE" (a replica's link to its
	// master).
	From string `json:"from"`
	// Nodes are node names or roles, or "all" for every lock node.
	Nodes []string `json:"nodes"`
}

// Trap is a nemesis.Trap as data: where it waits, whom it catches, and
// what is done to that client there.
type Trap struct {
	// Point is a named point the workload or a lock calls
	// (workloads.BeforeWrite); Command a command boundary. One of them.
	Point   string           `json:"point,omitempty"`
	Command *nemesis.Command `json:"command,omitempty"`
	// Client is whom the trap waits for: "any", an index, or, for a trap
	// armed inside another's then or wake, "caught" or "other".
	Client string `json:"client"`
	// Pause, InLease, MinPause and Outlast are nemesis.Trap's, in TTLs.
	Pause    Num  `json:"pause,omitzero"`
	InLease  Num  `json:"in_lease,omitzero"`
	MinPause Num  `json:"min_pause,omitzero"`
	Outlast  Num  `json:"outlast,omitzero"`
	Stall    bool `json:"stall,omitempty"`
	Crash    bool `json:"crash,omitempty"`
	Cancel   bool `json:"cancel,omitempty"`
	// Then runs as the trap springs, before the pause; Wake as the pause
	// ends. In them "caught" is the client this trap caught.
	Then []Action `json:"then,omitempty"`
	Wake []Action `json:"wake,omitempty"`
}

// Num is a number of TTLs in a plan: a literal, or the value of one of the
// story's parameters in this run, written "$name" (a sweep varies it).
type Num struct {
	V     float64
	Param string
}

// TTLs is the literal n TTLs.
func TTLs(n float64) Num { return Num{V: n} }

// ParamNum is the value of the story's parameter name.
func ParamNum(name string) Num { return Num{Param: name} }

// IsZero lets an unset number be left out of a file.
func (n Num) IsZero() bool { return n.V == 0 && n.Param == "" }

// String is the number as a file writes it.
func (n Num) String() string {
	if n.Param != "" {
		return "$" + n.Param
	}
	return strconv.FormatFloat(n.V, 'g', -1, 64)
}

// MarshalJSON writes a literal as a number and a parameter as "$name".
func (n Num) MarshalJSON() ([]byte, error) {
	if n.Param != "" {
		return json.Marshal("$" + n.Param)
	}
	return json.Marshal(n.V)
}

// UnmarshalJSON reads a number or "$name". Its error is a type error,
// which encoding/json tells the field of.
func (n *Num) UnmarshalJSON(b []byte) error {
	bad := &json.UnmarshalTypeError{Value: strings.TrimSpace(string(b)), Type: numType}
	if s, ok := bytes.CutPrefix(bytes.TrimSpace(b), []byte(`"`)); ok {
		name, ok := strings.CutPrefix(strings.TrimSuffix(string(s), `"`), "$")
		if !ok || name == "" {
			return bad
		}
		*n = Num{Param: name}
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return bad
	}
	*n = Num{V: v}
	return nil
}

// numType is Num's type, which a file's error words as what it is.
var numType = reflect.TypeFor[Num]()

// of is the number in a run.
func (n Num) of(e *Env) float64 {
	if n.Param != "" {
		return e.Param(n.Param)
	}
	return n.V
}

// in is the number in a run, as a length of time.
func (n Num) in(e *Env) time.Duration { return e.TTLs(n.of(e)) }

// Schedule compiles the plan for one run: roles and clients named, every
// number at this run's TTL and parameters. The plan must have passed
// Check; what only a run can tell (a role its topology lacks, a client it
// does not have) is an error here.
func (p Plan) Schedule(e *Env) (nemesis.Schedule, error) {
	c := &compiler{e: e}
	var out nemesis.Schedule
	for i, st := range p {
		where := fmt.Sprintf("schedule[%d]", i)
		if st.Do == "arm" {
			t, _, err := c.trap(where+".trap", st.Trap)
			if err != nil {
				return nil, err
			}
			set, err := t(noClient)
			if err != nil {
				return nil, fmt.Errorf("%s.trap: %w", where, err)
			}
			arm := e.Gate.ArmStep(st.At.in(e), set)
			out = append(out, nemesis.Step{At: arm.At, Name: arm.Name, Arms: true, Do: func(ctx context.Context) error {
				c.started(ctx)
				return arm.Do(ctx)
			}})
			continue
		}
		do, name, err := c.action(where, st.Action)
		if err != nil {
			return nil, err
		}
		out = append(out, nemesis.Step{At: st.At.in(e), Name: name, Do: func(ctx context.Context) error {
			c.started(ctx)
			return do(ctx, noClient)
		}})
	}
	for i, st := range p {
		if st.Until.IsZero() {
			continue
		}
		where := fmt.Sprintf("schedule[%d]", i)
		k := actions[st.Do]
		if k.Undo == nil {
			return nil, fmt.Errorf("%s.until: %s is not undone", where, st.Do)
		}
		undo, name, err := c.action(where, k.Undo(st.Action))
		if err != nil {
			return nil, err
		}
		out = append(out, nemesis.Step{At: st.Until.in(e), Name: name, Do: func(ctx context.Context) error { return undo(ctx, noClient) }})
	}
	// In the order they are taken, as the schedule is listed.
	slices.SortStableFunc(out, func(a, b nemesis.Step) int { return cmp.Compare(a.At, b.At) })
	return out, nil
}

// noClient is the caught client of an action no trap runs.
const noClient = -2

// deed is a compiled action: caught is the client the trap running it
// caught, or noClient.
type deed func(ctx context.Context, caught int) error

// compiler turns a plan into steps for one run.
type compiler struct {
	e *Env
	// bg is the schedule's context, which a delayed action runs under: a
	// trap's own context is its op's, which ends long before the delay.
	mu sync.Mutex
	bg context.Context
}

// started keeps the schedule's context, the first time a step runs.
func (c *compiler) started(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bg == nil {
		c.bg = ctx
	}
}

// background is the schedule's context.
func (c *compiler) background() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bg == nil {
		return context.Background()
	}
	return c.bg
}

// action compiles a, found at path: its deed and the words the schedule
// lists it by.
func (c *compiler) action(path string, a Action) (deed, string, error) {
	k, ok := actions[a.Do]
	if !ok {
		return nil, "", fmt.Errorf("%s.do: unknown action %q", path, a.Do)
	}
	do, name, err := k.compile(c, path, a)
	if err != nil {
		return nil, "", err
	}
	if a.Delay.IsZero() || k.delays {
		return do, name, nil
	}
	delay := a.Delay.in(c.e)
	name = fmt.Sprintf("%s later, %s", delay, name)
	return func(_ context.Context, caught int) error {
		c.aside(func(bg context.Context) {
			select {
			case <-bg.Done():
			case <-time.After(delay):
				c.e.Gate.Fail(bg, do(bg, caught))
			}
		})
		return nil
	}, name, nil
}

// aside runs do in the schedule's context without holding up the steps
// after it, counted until it ends (Env.Settle).
func (c *compiler) aside(do func(bg context.Context)) {
	bg := c.background()
	c.e.deeds.Add(1)
	c.e.pending.Add(1)
	go func() {
		defer c.e.deeds.Done()
		defer c.e.pending.Add(-1)
		do(bg)
	}()
}

// actionsOf compiles a trap's then or wake: one deed doing each in turn,
// and their words.
func (c *compiler) actionsOf(path string, as []Action) (deed, string, error) {
	if len(as) == 0 {
		return nil, "", nil
	}
	var deeds []deed
	var names []string
	for i, a := range as {
		d, name, err := c.action(fmt.Sprintf("%s[%d]", path, i), a)
		if err != nil {
			return nil, "", err
		}
		deeds, names = append(deeds, d), append(names, name)
	}
	return func(ctx context.Context, caught int) error {
		for _, d := range deeds {
			if err := d(ctx, caught); err != nil {
				return err
			}
		}
		return nil
	}, strings.Join(names, ", then "), nil
}

// trapActions is d as a trap's Then or After (nil for none). A trap's
// actions run under its op's context, which the run's end need not have
// ended; one that waits in the schedule's context (kill-leader's election,
// heal-all's restarts) is cut short by the run's end as a step is, not an
// error of the run's.
func (c *compiler) trapActions(d deed) func(ctx context.Context, client, process int) error {
	if d == nil {
		return nil
	}
	return func(ctx context.Context, client, _ int) error {
		return nemesis.CutShort(c.background(), d(ctx, client))
	}
}

// trap compiles t, found at path, to the nemesis.Trap it sets once the
// client that caught the trap arming it is known, and the words for it.
func (c *compiler) trap(path string, t *Trap) (func(caught int) (nemesis.Trap, error), string, error) {
	if t == nil {
		return nil, "", fmt.Errorf("%s: arm needs a trap", path)
	}
	who, err := c.client(path+".client", t.Client, true)
	if err != nil {
		return nil, "", err
	}
	then, thenName, err := c.actionsOf(path+".then", t.Then)
	if err != nil {
		return nil, "", err
	}
	wake, wakeName, err := c.actionsOf(path+".wake", t.Wake)
	if err != nil {
		return nil, "", err
	}
	if wakeName != "" {
		wakeName = "as it wakes, " + wakeName
		if thenName != "" {
			thenName += "; "
		}
	}
	e := c.e
	set := func(client int) nemesis.Trap {
		out := nemesis.Trap{Point: t.Point, Client: client, Pause: t.Pause.in(e), InLease: t.InLease.in(e), MinPause: t.MinPause.in(e),
			Outlast: t.Outlast.in(e), Stall: t.Stall, Crash: t.Crash, Cancel: t.Cancel, ThenName: thenName + wakeName}
		if t.Command != nil {
			cmd := *t.Command
			out.Command = &cmd
		}
		out.Then, out.After = c.trapActions(then), c.trapActions(wake)
		return out
	}
	// The words name the client as the plan does: which client "caught"
	// is, only the run knows.
	name := set(nemesis.AnyClient).String()
	if t.Client != "any" {
		name = strings.Replace(name, "the next client", "client "+t.Client, 1)
	}
	return func(caught int) (nemesis.Trap, error) {
		client, err := who(caught)
		if err != nil {
			return nemesis.Trap{}, err
		}
		return set(client), nil
	}, name, nil
}

// client resolves a client reference: an index, "caught" or "other"
// (known only when a trap springs), or, where a trap waits, "any".
func (c *compiler) client(path, ref string, trap bool) (func(caught int) (int, error), error) {
	switch ref {
	case "any":
		if !trap {
			return nil, fmt.Errorf("%s: any names no one client: only a trap waits for any", path)
		}
		return func(int) (int, error) { return nemesis.AnyClient, nil }, nil
	case "caught", "other":
		n := len(c.e.Clients)
		return func(caught int) (int, error) {
			if caught < 0 {
				return 0, fmt.Errorf("%s: %s names a client only inside a trap's then or wake", path, ref)
			}
			if ref == "other" {
				return (caught + 1) % n, nil
			}
			return caught, nil
		}, nil
	}
	i, err := strconv.Atoi(ref)
	if err != nil || i < 0 {
		return nil, fmt.Errorf("%s: %q is no client (an index, caught, other or any)", path, ref)
	}
	if i >= len(c.e.Clients) {
		return nil, fmt.Errorf("%s: client %d, but the run has %d", path, i, len(c.e.Clients))
	}
	return func(int) (int, error) { return i, nil }, nil
}

// TouchesNodes says whether any step, or any action a trap or
// when-acquiring takes, acts on a lock node's process (an action of the
// node or failover family not aimed at the store). Where none does, how
// long a lock node takes to answer measures the machine, not a fault, and
// the lateness meter may ask it. A node's clock moved by libfaketime
// changes what the server reads as the time, not how soon it answers.
func (p Plan) TouchesNodes() bool {
	touching := map[string]bool{}
	for _, family := range [][]ActionKind{nodeActions, failoverActions} {
		for _, k := range family {
			for _, name := range append([]string{k.Name}, k.Aliases...) {
				touching[name] = true
			}
		}
	}
	var touches func(as []Action) bool
	touches = func(as []Action) bool {
		for _, a := range as {
			if touching[a.Do] && a.Node != "store" || touches(a.Then) {
				return true
			}
			if a.Trap != nil && (touches(a.Trap.Then) || touches(a.Trap.Wake)) {
				return true
			}
		}
		return false
	}
	steps := make([]Action, len(p))
	for i, st := range p {
		steps[i] = st.Action
	}
	return touches(steps)
}
