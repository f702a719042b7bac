package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/scenario"
)

// listMode prints what there is to run, and runs nothing.
var listMode = mode{flag: "list", does: "lists the scenarios and locks, then exits",
	run: func(_ context.Context, _ *flags, stdout, _ io.Writer) int {
		printList(stdout)
		return 0
	}}

// printList writes every scenario (its expectations, parameters and what
// it needs), the actions and node roles a scenario file can use, and every
// lock with the faults it claims to survive.
func printList(w io.Writer) {
	fmt.Fprintln(w, "scenarios:")
	for _, n := range scenario.Names() {
		s, _ := scenario.Lookup(n)
		fmt.Fprintf(w, "  %-18s %s\n", n, s.Story)
		if len(s.Requires) > 0 {
			var needs []string
			for _, e := range s.Requires {
				needs = append(needs, e.String())
			}
			fmt.Fprintf(w, "  %-18s   needs (else vacuous): %s\n", "", strings.Join(needs, "; "))
		}
		for _, l := range s.Locks() {
			fmt.Fprintf(w, "  %-18s   %-18s expect %s\n", "", l, s.Expect[l])
		}
		for _, p := range s.Params {
			fmt.Fprintf(w, "  %-18s   param %s (%s; %g, from %g to %g): %s\n", "", p.Name, p.Unit, p.Default, p.Min, p.Max, p.Help)
		}
		for _, k := range slices.Sorted(maps.Keys(s.NotFor)) {
			fmt.Fprintf(w, "  %-18s   not for %s locks: %s\n", "", k, s.NotFor[k])
		}
		printLeftOut(w, s)
	}
	fmt.Fprintln(w, "actions a scenario file's schedule can take (-print-scenario NAME shows them in use; times and lengths in TTLs):")
	for _, n := range scenario.ActionNames() {
		a, _ := scenario.LookupAction(n)
		args := strings.Join(a.Needs, ", ")
		if len(a.Takes) > 0 {
			args = strings.TrimPrefix(args+", optional "+strings.Join(a.Takes, ", "), ", ")
		}
		fmt.Fprintf(w, "  %-18s %s", n, a.Help)
		if args != "" {
			fmt.Fprintf(w, " (%s)", args)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "nodes by role in a scenario file:")
	for _, r := range slices.Sorted(maps.Keys(scenario.NodeRoles)) {
		fmt.Fprintf(w, "  %-18s %s\n", r, scenario.NodeRoles[r])
	}
	fmt.Fprintln(w, "locks:")
	for _, n := range locks.Names() {
		info, _ := locks.Lookup(n)
		broken := ""
		if info.Broken {
			broken = " [BROKEN ON PURPOSE]"
		}
		fmt.Fprintf(w, "  %-18s %s%s\n", n, info.Summary, broken)
		fmt.Fprintf(w, "  %-18s claims its promise under: %s\n", "", info.ClaimList())
		fmt.Fprintf(w, "  %-18s traits: %s\n", "", traitLine(info.Traits))
	}
}

// printLeftOut writes, for a story, each lock of a kind it judges that
// its rules leave out, and why: a reader comparing locks sees a reason
// where a cell is empty.
func printLeftOut(w io.Writer, s scenario.Scenario) {
	if s.Exploration {
		return
	}
	for _, n := range locks.Names() {
		info, _ := locks.Lookup(n)
		if j := s.Judge(info); j.Skipped != "" && !j.ForKind {
			fmt.Fprintf(w, "  %-18s   %-18s left out: %s\n", "", n, j.Skipped)
		}
	}
}

// traitLine is a lock's traits in one line.
func traitLine(t locks.Traits) string {
	b, err := json.Marshal(t)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
