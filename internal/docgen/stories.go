package docgen

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
)

// stories is generated/stories.md: every built-in story, what it is told
// with, what it requires, and what it expects of each lock and why.
func stories() (string, error) {
	var told, explore []scenario.Scenario
	for _, name := range scenario.Names() {
		s, err := scenario.Lookup(name)
		if err != nil {
			return "", err
		}
		if s.Exploration {
			explore = append(explore, s)
		} else {
			told = append(told, s)
		}
	}
	var b strings.Builder
	b.WriteString("# The stories\n\n")
	b.WriteString("Every built-in story (`scenario.Names`), as `go run ./cmd/run -list` and `-print-scenario NAME` show it: what happens, " +
		"what it is told with, the nemesis actions a run must show or be `vacuous`, its parameters (`-sweep` varies them), " +
		"and what each lock must show, with why. An outcome is followed by the observations that must be seen (+) or must not (−); " +
		"a lock a story names no expectation for is not run in it. How to read the words: [stories and findings](../stories.md).\n\n")
	fmt.Fprintf(&b, "%d stories told, %d explorations:\n\n", len(told), len(explore))
	for _, s := range told {
		fmt.Fprintf(&b, "[`%s`](#%s) · ", s.Name, s.Name)
	}
	b.WriteString("and the explorations [below](#explorations).\n\n")
	b.WriteString(parameters(told))
	for _, s := range told {
		b.WriteString("\n")
		story(&b, s)
	}
	b.WriteString("\n## Explorations\n\n")
	b.WriteString("Not part of `-scenario all`: each is run for the locks named with `-lock` and judged against the lock's own claims " +
		"(`locks.Info.Claims`, in [locks](locks.md)): a promise broken under a fault the lock claims to survive is a finding. " +
		"See [exploration](../exploration.md).\n")
	for _, s := range explore {
		fmt.Fprintf(&b, "\n### `%s`\n\n%s\n\n", s.Name, s.Story)
		toldWith(&b, s)
	}
	return b.String(), nil
}

// parameters is the table of every story's parameters, the numbers a run
// may set and -sweep varies; every story also has ttl, which is the
// harness's, not the story's.
func parameters(told []scenario.Scenario) string {
	var b strings.Builder
	b.WriteString("## Parameters\n\n")
	b.WriteString("The numbers a story is told with that a run may set and `-sweep PARAM=FROM..TO` varies (`scenario.Param`). " +
		"Every story also has `ttl`, the lease itself, which the harness varies with the story's parameters held at their length in time.\n\n")
	b.WriteString(headerRow("story", "parameter", "unit", "default", "range", "threshold", "what it is"))
	for _, s := range told {
		for _, p := range s.Params {
			threshold := ""
			if p.Threshold != 0 {
				threshold = fmt.Sprintf("%g", p.Threshold)
			}
			b.WriteString(row(code(s.Name), code(p.Name), p.Unit, fmt.Sprintf("%g", p.Default), fmt.Sprintf("%g–%g", p.Min, p.Max), threshold, p.Help))
		}
	}
	return b.String()
}

// story writes one story's section.
func story(b *strings.Builder, s scenario.Scenario) {
	fmt.Fprintf(b, "## `%s`\n\n%s\n\n", s.Name, s.Story)
	toldWith(b, s)
	if len(s.Requires) > 0 {
		var needs []string
		for _, e := range s.Requires {
			needs = append(needs, e.String())
		}
		if d := s.Traffic.Delayed; d > 0 {
			needs = append(needs, fmt.Sprintf("%d read(s) or write(s) held up by the delay", d))
		}
		if s.Traffic.Contended > 0 {
			needs = append(needs, contended(s.Traffic))
		}
		fmt.Fprintf(b, "- **Requires** (else vacuous): %s\n", strings.Join(needs, "; "))
	}
	for _, p := range s.Params {
		threshold := ""
		if p.Threshold != 0 {
			threshold = fmt.Sprintf(", threshold %g", p.Threshold)
		}
		fmt.Fprintf(b, "- **Parameter** `%s` (%s; default %g, from %g to %g%s): %s\n", p.Name, p.Unit, p.Default, p.Min, p.Max, threshold, p.Help)
	}
	if s.Alone != "" {
		fmt.Fprintf(b, "- **Runs alone** on the machine: %s\n", s.Alone)
	}
	if s.AloneWorkers != "" {
		fmt.Fprintf(b, "- **Runs alone** on the machine where its clients are worker processes: %s\n", s.AloneWorkers)
	}
	if s.InProcess != "" {
		fmt.Fprintf(b, "- **Clients in the harness's process** (`-client-procs` is refused): %s\n", s.InProcess)
	}
	for _, kind := range slices.Sorted(maps.Keys(s.NotFor)) {
		fmt.Fprintf(b, "- **Not for %s locks**: %s\n", kind, s.NotFor[kind])
	}
	b.WriteString("\n")
	b.WriteString(expectations(s))
}

// toldWith writes the line that says what a story is told with.
func toldWith(b *strings.Builder, s scenario.Scenario) {
	parts := []string{fmt.Sprintf("%d clients", s.Clients), "TTL " + s.TTL.String()}
	if s.ExactClients > 0 {
		parts[0] = fmt.Sprintf("exactly %d clients", s.ExactClients)
	}
	if s.MinTTL > 0 {
		parts = append(parts, "at least "+s.MinTTL.String())
	}
	limit := fmt.Sprintf("time limit %g TTLs", s.TimeLimitTTLs)
	if s.MinTimeLimitTTLs != s.TimeLimitTTLs {
		limit += fmt.Sprintf(" (at least %g)", s.MinTimeLimitTTLs)
	}
	parts = append(parts, limit)
	if s.Nodes > 0 {
		parts = append(parts, fmt.Sprintf("%d lock nodes", s.Nodes))
	}
	parts = append(parts, topology(s.Topology)...)
	if s.HoldTTLs > 0 {
		parts = append(parts, fmt.Sprintf("holders work %g TTLs", s.HoldTTLs))
	}
	if s.Fairness {
		parts = append(parts, "fairness checked")
	}
	fmt.Fprintf(b, "- **Told with**: %s\n", strings.Join(parts, ", "))
}

// topology says what a story's topology sets.
func topology(t scenario.Topology) []string {
	var out []string
	if t.Replicated {
		out = append(out, "a replica")
	}
	if t.Sentinel {
		out = append(out, "three redis-sentinels")
	}
	if t.Cluster {
		out = append(out, "a Redis Cluster of three masters with a replica each")
	}
	if t.Clock {
		out = append(out, "node clocks under libfaketime")
	}
	if t.Persistence != "" {
		out = append(out, "persistence "+string(t.Persistence))
	}
	if len(t.Args) > 0 {
		out = append(out, "nodes run with `"+strings.Join(t.Args, " ")+"`")
	}
	return out
}

// expectations is a story's table of what each registered lock must
// show, and which rule (picking locks by their traits) said so, then the
// locks it leaves out and why (beside its NotFor lines); locks the same
// rule decided alike share a row.
func expectations(s scenario.Scenario) string {
	type group struct {
		locks []string
		j     scenario.Judgement
	}
	var judged, left []*group
	byKey := map[[3]string]*group{}
	for _, name := range locks.Names() {
		info, _ := locks.Lookup(name)
		j := s.Judge(info)
		if j.Unjudged() || j.ForKind {
			continue
		}
		key := [3]string{j.By, j.Skipped}
		if j.Expect != nil {
			key[2] = j.Expect.String() + j.Expect.Why
		}
		g, ok := byKey[key]
		if !ok {
			g = &group{j: j}
			byKey[key] = g
			if j.Expect != nil {
				judged = append(judged, g)
			} else {
				left = append(left, g)
			}
		}
		g.locks = append(g.locks, name)
	}
	var b strings.Builder
	b.WriteString(headerRow("lock", "expected", "rule", "why"))
	for _, g := range judged {
		b.WriteString(row(codes(g.locks), expectationWords(*g.j.Expect), g.j.By, g.j.Expect.Why))
	}
	if len(left) > 0 {
		b.WriteString("\nLeft out:\n\n")
		b.WriteString(headerRow("lock", "rule", "why"))
		for _, g := range left {
			b.WriteString(row(codes(g.locks), g.j.By, g.j.Skipped))
		}
	}
	return b.String()
}

// expectationWords is an expectation as the matrix prints it, the outcome
// in bold.
func expectationWords(e verdict.Expectation) string {
	s := e.String()
	out, rest, _ := strings.Cut(s, " ")
	if rest != "" {
		rest = " " + rest
	}
	return "**" + out + "**" + rest
}

// contended says what a story's Traffic.Contended asks, in words.
func contended(t verdict.Traffic) string {
	from := "after the fault"
	if t.PastLease {
		from = "after the holder's lease ended"
	}
	s := fmt.Sprintf("%d lock attempt(s) by other clients %s, while the client that held the lock when the fault struck had not yet written or released it", t.Contended, from)
	if t.ContendedIfShort {
		s += " (asked only of a run that showed no violation where one was expected)"
	}
	return s
}
