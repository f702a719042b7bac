package scenario

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/verdict"
)

// A scenario file is a story as data, in JSON: what Scenario holds, its
// schedule a Plan. -print-scenario writes a built-in story in this form
// and -scenario-file runs one, so a story can be changed without
// rebuilding the harness, and a built-in story run from its file is the
// same run.

// scenarioJSON is a Scenario as a file writes it: leases as durations
// ("500ms"), not nanoseconds.
type scenarioJSON struct {
	scenarioFields
	TTL    string `json:"ttl,omitempty"`
	MinTTL string `json:"min_ttl,omitempty"`
}

// scenarioFields is Scenario without its methods, so the two
// conversions below do not call themselves.
type scenarioFields Scenario

// MarshalJSON writes the story as a scenario file holds it.
func (s Scenario) MarshalJSON() ([]byte, error) {
	out := scenarioJSON{scenarioFields: scenarioFields(s)}
	if s.TTL > 0 {
		out.TTL = s.TTL.String()
	}
	if s.MinTTL > 0 {
		out.MinTTL = s.MinTTL.String()
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads a story as a scenario file holds it.
func (s *Scenario) UnmarshalJSON(b []byte) error {
	var in scenarioJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return err
	}
	*s = Scenario(in.scenarioFields)
	for _, d := range []struct {
		field, v string
		to       *time.Duration
	}{{"ttl", in.TTL, &s.TTL}, {"min_ttl", in.MinTTL, &s.MinTTL}} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil || v <= 0 {
			return &fieldError{d.field, fmt.Sprintf("%q is no length of time above zero (500ms, 3s)", d.v)}
		}
		*d.to = v
	}
	return nil
}

// fieldError is a bad field of a scenario file.
type fieldError struct{ field, problem string }

func (e *fieldError) Error() string { return e.field + ": " + e.problem }

// Print writes the story as a scenario file. A story whose schedule is
// drawn as it runs (exploration) has no file form.
func (s Scenario) Print(w io.Writer) error {
	if s.Plan == nil && (s.Schedule != nil || s.Draw != nil) {
		return fmt.Errorf("scenario %s draws its schedule as it runs (from the seed, or the probe): a run of it keeps the schedule it drew as a file (scenario.json in the run's directory)", s.Name)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// Save writes the story as a scenario file at path.
func (s Scenario) Save(path string) error {
	var b bytes.Buffer
	if err := s.Print(&b); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// Parse reads a scenario file and checks it; the error names the field at
// fault and says what is wrong, in one line.
func Parse(data []byte) (Scenario, error) {
	var s Scenario
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Scenario{}, decodeError(data, err)
	}
	if dec.More() {
		return Scenario{}, errors.New("more than one JSON value: a scenario file holds one story")
	}
	if s.Plan == nil {
		s.Plan = Plan{}
	}
	if err := s.Check(); err != nil {
		return Scenario{}, err
	}
	if s.Interval != nil && len(s.Plan) == 0 {
		// A user's system: its faults are drawn from the seed, run by run.
		s.Plan, s.Draw = nil, intervalPlan
	}
	return s.WithDefaults(), nil
}

// decodeError says where a file failed to decode, in one line.
func decodeError(data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var fe *fieldError
	switch {
	case errors.As(err, &fe):
		return fe
	case errors.As(err, &syn):
		return fmt.Errorf("line %d: %v", 1+bytes.Count(data[:min(int(syn.Offset), len(data))], []byte("\n")), syn)
	case errors.As(err, &typ) && typ.Type == numType:
		return &fieldError{typ.Field, fmt.Sprintf(`%s: want a number of TTLs, or "$name" of one of the story's params`, typ.Value)}
	case errors.As(err, &typ):
		return &fieldError{typ.Field, fmt.Sprintf("a %s cannot go here, want %s", typ.Value, typ.Type)}
	case errors.Is(err, io.EOF):
		return errors.New("the file is empty: want a story as a JSON object")
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if f, ok := strings.CutPrefix(msg, "unknown field "); ok {
		return &fieldError{strings.Trim(f, `"`), "no such field"}
	}
	// A Num's or a field's own error, which encoding/json wraps without
	// saying where: its message names what it wants.
	return errors.New(msg)
}

// storyName is what a story's name may be: it names directories.
var storyName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// Check says what is wrong with a story as data, naming the field, or nil.
func (s Scenario) Check() error {
	bad := func(field, format string, a ...any) error { return &fieldError{field, fmt.Sprintf(format, a...)} }
	switch {
	case !storyName.MatchString(s.Name):
		return bad("name", "%q: want lower-case letters, digits and dashes", s.Name)
	case strings.TrimSpace(s.Story) == "":
		return bad("story", "empty: say what happens")
	case s.Clients < 0:
		return bad("clients", "%d is below zero", s.Clients)
	case s.ExactClients < 0:
		return bad("exact_clients", "%d is below zero", s.ExactClients)
	case s.Nodes < 0:
		return bad("nodes", "%d is below zero", s.Nodes)
	case s.RestartShare < 0 || s.RestartShare >= 1:
		return bad("restart_share", "%g: want a share of the lease, from 0 up to 1", s.RestartShare)
	case s.ExpiryShare < 0 || s.ExpiryShare >= 1:
		return bad("expiry_share", "%g: want a share of the lease, from 0 up to 1", s.ExpiryShare)
	case s.TimeLimitTTLs < 0:
		return bad("time_limit_ttls", "%g is below zero", s.TimeLimitTTLs)
	case s.MinTimeLimitTTLs < 0 || s.MinTimeLimitTTLs > s.TimeLimitTTLs && s.TimeLimitTTLs > 0:
		return bad("min_time_limit_ttls", "%g: want from 0 to time_limit_ttls", s.MinTimeLimitTTLs)
	case s.HoldTTLs < 0:
		return bad("hold_ttls", "%g is below zero", s.HoldTTLs)
	case s.WaiterTimeoutTTLs < 0:
		return bad("waiter_timeout_ttls", "%g is below zero", s.WaiterTimeoutTTLs)
	case s.WaitTTLs < 0:
		return bad("wait_ttls", "%g is below zero", s.WaitTTLs)
	case s.Topology.Sentinel && !s.Topology.Replicated:
		return bad("topology.sentinel", "Sentinel watches a replicated master: set topology.replicated too")
	case s.Topology.Cluster && (s.Topology.Replicated || s.Topology.Sentinel):
		return bad("topology.cluster", "a Redis Cluster replicates on its own: drop topology.replicated and topology.sentinel")
	case len(s.Expect) == 0:
		return bad("expect", "empty: say what at least one lock must show")
	case s.Workload.Check() != nil:
		return bad("workload", "%v", s.Workload.Check())
	case s.Interval != nil && s.Interval.Check(1) != nil:
		return bad("interval", "%v", s.Interval.Check(1))
	}
	switch s.Topology.Persistence {
	case "", "none", "aof-everysec", "aof-always":
	default:
		return bad("topology.persistence", "%q: want none, aof-everysec or aof-always", s.Topology.Persistence)
	}
	for _, l := range s.Locks() {
		x := s.Expect[l]
		if _, err := locks.Lookup(l); err != nil {
			return bad("expect."+l, "no such lock (one of %s)", strings.Join(locks.Names(), ", "))
		}
		if !slices.Contains(verdict.Outcomes, x.Outcome) && x.Outcome != verdict.PromiseKept {
			return bad("expect."+l+".outcome", "%q: want one of %s", x.Outcome, outcomeWords())
		}
	}
	seen := map[string]bool{}
	for i, p := range s.Params {
		at := fmt.Sprintf("params[%d]", i)
		switch {
		case !storyName.MatchString(p.Name):
			return bad(at+".name", "%q: want lower-case letters, digits and dashes", p.Name)
		case seen[p.Name]:
			return bad(at+".name", "%q twice", p.Name)
		case !(p.Min <= p.Default && p.Default <= p.Max):
			return bad(at, "want min <= default <= max, have %g, %g, %g", p.Min, p.Default, p.Max)
		}
		seen[p.Name] = true
	}
	for i, r := range s.Requires {
		if _, ok := fault.Lookup(r.Op); !ok {
			return bad(fmt.Sprintf("requires[%d].op", i), "%q is no nemesis op (one of %s)", r.Op, opWords())
		}
	}
	if r := s.TrafficAt; r != nil && !seen[r.Param] {
		return bad("traffic_at.param", "%q is none of the story's params", r.Param)
	}
	return s.Plan.Check(seen)
}

func outcomeWords() string {
	var w []string
	for _, o := range append(slices.Clone(verdict.Outcomes), verdict.PromiseKept) {
		w = append(w, string(o))
	}
	return strings.Join(w, ", ")
}

func opWords() string {
	var w []string
	for _, o := range fault.Ops() {
		w = append(w, string(o))
	}
	return strings.Join(w, ", ")
}

// Check says what is wrong with the plan as data, naming the field, or
// nil. params are the story's parameters a number may name. What only a
// run can tell (a node's name, a client's index in range) Schedule says.
func (p Plan) Check(params map[string]bool) error {
	for i, st := range p {
		at := fmt.Sprintf("schedule[%d]", i)
		if err := checkNum(at+".at", st.At, params, false); err != nil {
			return err
		}
		if !st.Until.IsZero() {
			if err := checkNum(at+".until", st.Until, params, false); err != nil {
				return err
			}
			if k, ok := actions[st.Do]; ok && k.Undo == nil {
				return &fieldError{at + ".until", st.Do + " is not undone: drop until"}
			}
			if st.Until.Param == "" && st.At.Param == "" && st.Until.V <= st.At.V {
				return &fieldError{at + ".until", fmt.Sprintf("%g is not after at (%g)", st.Until.V, st.At.V)}
			}
		}
		if err := checkAction(at, st.Action, params, false); err != nil {
			return err
		}
	}
	return nil
}

// checkAction checks a at path; inTrap says it runs in a trap's then or
// wake, where caught and other name clients.
func checkAction(path string, a Action, params map[string]bool, inTrap bool) error {
	k, ok := actions[a.Do]
	if !ok {
		return &fieldError{path + ".do", fmt.Sprintf("%q is no action (one of %s)", a.Do, strings.Join(ActionNames(), ", "))}
	}
	set := map[string]bool{"node": a.Node != "", "client": a.Client != "", "cuts": len(a.Cuts) > 0, "direction": a.Direction != "",
		"by": !a.By.IsZero(), "for": !a.For.IsZero(), "jitter": !a.Jitter.IsZero(), "delay": !a.Delay.IsZero(), "trap": a.Trap != nil, "then": len(a.Then) > 0}
	for _, f := range k.Needs {
		if !set[f] {
			return &fieldError{path + "." + f, "missing: " + a.Do + " needs it"}
		}
	}
	for _, f := range slices.Sorted(maps.Keys(set)) {
		if set[f] && !slices.Contains(k.Needs, f) && !slices.Contains(k.Takes, f) && !(f == "delay" && inTrap) {
			why := a.Do + " does not take it"
			if f == "delay" {
				why = "only an action in a trap's then or wake is delayed (a step has its at)"
			}
			return &fieldError{path + "." + f, why}
		}
	}
	if a.Direction != "" && a.Direction != "upstream" && a.Direction != "downstream" {
		return &fieldError{path + ".direction", fmt.Sprintf("%q: want upstream or downstream", a.Direction)}
	}
	if err := checkClient(path+".client", a.Client, inTrap, false); err != nil {
		return err
	}
	for i, c := range a.Cuts {
		at := fmt.Sprintf("%s.cuts[%d]", path, i)
		if r, ok := strings.CutPrefix(c.From, "client "); ok {
			if err := checkClient(at+".from", r, inTrap, false); err != nil {
				return err
			}
		} else if c.From != "every client" && !strings.HasPrefix(c.From, "replication of ") {
			return &fieldError{at + ".from", fmt.Sprintf(`%q: want "client N", "every client" or "replication of NODE"`, c.From)}
		}
		if len(c.Nodes) == 0 {
			return &fieldError{at + ".nodes", "empty: name the nodes, or all"}
		}
	}
	for _, n := range []struct {
		field string
		v     Num
		neg   bool
	}{{"by", a.By, true}, {"for", a.For, false}, {"jitter", a.Jitter, false}, {"delay", a.Delay, false}} {
		if err := checkNum(path+"."+n.field, n.v, params, n.neg); err != nil {
			return err
		}
	}
	for i, t := range a.Then {
		if err := checkAction(fmt.Sprintf("%s.then[%d]", path, i), t, params, inTrap); err != nil {
			return err
		}
	}
	if a.Trap != nil {
		return checkTrap(path+".trap", *a.Trap, params, inTrap)
	}
	return nil
}

func checkTrap(path string, t Trap, params map[string]bool, inTrap bool) error {
	switch {
	case (t.Point == "") == (t.Command == nil):
		return &fieldError{path, "want one of point and command: where the trap waits"}
	case t.Crash && (t.Cancel || t.Stall || !t.Pause.IsZero()):
		return &fieldError{path + ".crash", "a crashed client neither pauses nor is cancelled: drop pause, stall and cancel"}
	case t.Stall && t.Pause.IsZero():
		return &fieldError{path + ".stall", "a stall needs a pause: how long"}
	case t.Command != nil && (t.Command.Nth < 0 || t.Command.Every < 0):
		return &fieldError{path + ".command", "nth and every count from 1"}
	}
	if err := checkClient(path+".client", t.Client, inTrap, true); err != nil {
		return err
	}
	for _, n := range []struct {
		field string
		v     Num
	}{{"pause", t.Pause}, {"in_lease", t.InLease}, {"min_pause", t.MinPause}, {"outlast", t.Outlast}} {
		if err := checkNum(path+"."+n.field, n.v, params, false); err != nil {
			return err
		}
	}
	for i, a := range t.Then {
		if err := checkAction(fmt.Sprintf("%s.then[%d]", path, i), a, params, true); err != nil {
			return err
		}
	}
	for i, a := range t.Wake {
		if err := checkAction(fmt.Sprintf("%s.wake[%d]", path, i), a, params, true); err != nil {
			return err
		}
	}
	return nil
}

// checkClient checks a client reference; empty is checked by Needs.
func checkClient(path, ref string, inTrap, trap bool) error {
	switch ref {
	case "":
		if trap {
			return &fieldError{path, "missing: any, or a client's index"}
		}
		return nil
	case "any":
		if trap {
			return nil
		}
		return &fieldError{path, "any names no one client: only a trap waits for any"}
	case "caught", "other":
		if inTrap {
			return nil
		}
		return &fieldError{path, ref + " names a client only inside a trap's then or wake"}
	}
	var i int
	if _, err := fmt.Sscanf(ref, "%d", &i); err != nil || i < 0 || fmt.Sprint(i) != ref {
		return &fieldError{path, fmt.Sprintf("%q is no client: an index, any, caught or other", ref)}
	}
	return nil
}

// checkNum checks a number of TTLs: a parameter of the story, not below
// zero unless neg.
func checkNum(path string, n Num, params map[string]bool, neg bool) error {
	if n.Param != "" && !params[n.Param] {
		return &fieldError{path, fmt.Sprintf("$%s is none of the story's params", n.Param)}
	}
	if n.V < 0 && !neg {
		return &fieldError{path, fmt.Sprintf("%g is below zero", n.V)}
	}
	return nil
}
