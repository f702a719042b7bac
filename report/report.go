// Package report turns a run's Result into what people read: results.json,
// porcupine's HTML timeline, and a short summary for the terminal.
package report

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/locktorture/locktorture/checker"
	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/history"
)

// Write saves the run's results.json (Result.Save) and puts beside it
// everything a person opens: timeline.html, the charts (PNG and SVG, with
// the harness's lateness when it was measured) and index.html.
func Write(r *engine.Result) error {
	if err := r.Save(); err != nil {
		return err
	}
	// A streamed run holds no client op to draw: its lateness is all its
	// plots can show.
	var charts []Chart
	if !r.Streamed {
		if err := Timeline(r, filepath.Join(r.Dir, "timeline.html")); err != nil {
			return err
		}
		var err error
		if charts, err = Charts(r.Ops); err != nil {
			return err
		}
	}
	// Lateness is measured beside the history, not in it: Charts, which
	// sees only ops, cannot draw it.
	if c, ok, err := latenessChart(r, Faults(r.Ops)); err != nil {
		return err
	} else if ok {
		charts = append(charts, c)
	}
	// A run that came out as expected is rarely zoomed into: its charts
	// are PNGs only.
	vector := Vector(r)
	for _, c := range charts {
		if err := c.Save(r.Dir, vector); err != nil {
			return err
		}
	}
	if err := page(r, charts, vector); err != nil {
		return err
	}
	// Written whole and judged: keep it compressed.
	return history.Compress(filepath.Join(r.Dir, "history.jsonl"))
}

// Vector says whether a run's charts are also written as SVG: when it did
// not match its expectation, the run a person zooms in. A matrix of stories
// that came out as expected keeps PNGs only.
func Vector(r *engine.Result) bool { return !r.Matched }

// timelineOps bounds how many lock ops a key's timeline shows: a window
// that a browser opens at once, however long the run.
const timelineOps = 200

// Timeline writes porcupine's visualization of a window of the lock ops,
// with the nemesis's actions, the protected-store ops and every anomaly in
// it as annotations, so the moment two holders overlap sits next to the
// pause that caused it. The window is drawn around what a person opens the
// timeline for: the first anomaly (the illegal stretch, if the lock ops
// were not linearizable), else the first fault, else the start.
func Timeline(r *engine.Result, path string) error {
	w := checker.Linearizable{Semantics: r.Semantics}.Timeline(r.Ops, focus(r), timelineOps)
	w.Info.AddAnnotations(annotations(r, w.From, w.To))
	if err := porcupine.VisualizePath(w.Model, w.Info, path); err != nil {
		return fmt.Errorf("report: timeline: %w", err)
	}
	return nil
}

// focus is the harness time the timeline is drawn around.
func focus(r *engine.Result) int64 {
	at := int64(-1)
	for _, v := range r.Verdicts {
		for _, a := range v.Anomalies {
			if a.Kind == "not-linearizable" {
				return a.Start
			}
			if at < 0 || a.Start < at {
				at = a.Start
			}
		}
	}
	if at >= 0 {
		return at
	}
	for _, op := range r.Ops {
		if op.Process == history.NemesisProcess {
			return op.Time
		}
	}
	return 0
}

// annotations are the faults, store ops and anomalies that touch [from,
// to]. The faults are paired as everywhere else in the report (Faults): a
// fault that lasts is a shaded span, an instant a point.
func annotations(r *engine.Result, from, to int64) []porcupine.Annotation {
	var out []porcupine.Annotation
	in := func(start, end int64) bool { return end >= from && start <= to }
	for _, f := range Faults(r.Ops) {
		if !in(f.Start, f.End) {
			continue
		}
		a := porcupine.Annotation{Tag: "nemesis", Start: f.Start, Description: f.Text()}
		if f.End > f.Start {
			a.End, a.BackgroundColor = f.End, "#f6d5a8"
		}
		out = append(out, a)
	}
	for _, p := range history.Pairs(r.Ops) {
		inv, c := p.Invoke, p.Completion
		if (inv.F == history.Write || inv.F == history.Read) && c != nil && in(inv.Time, c.Time) {
			out = append(out, porcupine.Annotation{ClientId: inv.Process, Start: inv.Time, End: c.Time,
				Description: describeStoreOp(inv, *c), BackgroundColor: storeColor(c.Type)})
		}
	}
	for _, v := range r.Verdicts {
		for _, a := range v.Anomalies {
			if a.Start == 0 && a.End == 0 || !in(a.Start, a.End) {
				continue
			}
			out = append(out, porcupine.Annotation{Tag: "anomaly: " + string(v.Checker), Start: a.Start, End: a.End,
				Description: a.Kind, Details: a.Text, BackgroundColor: "#f4a3a3"})
		}
	}
	return out
}

func target(op history.Op) string {
	if op.Value == nil {
		return ""
	}
	return op.Value.Target
}

func describeStoreOp(inv, c history.Op) string {
	var b strings.Builder
	b.WriteString(inv.F)
	if inv.F == history.Write && inv.Value != nil && inv.Value.Reg != nil {
		fmt.Fprintf(&b, " %d", *inv.Value.Reg)
		if inv.Value.Fence > 0 {
			fmt.Fprintf(&b, " fence %d", inv.Value.Fence)
		}
	}
	if inv.F == history.Read && c.Value != nil && c.Value.Reg != nil {
		fmt.Fprintf(&b, " → %d", *c.Value.Reg)
	}
	b.WriteString(" " + string(c.Type))
	if c.Error != "" {
		b.WriteString(": " + c.Error)
	}
	return b.String()
}

func storeColor(t history.Type) string {
	switch t {
	case history.OK:
		return "#cde8cd"
	case history.Fail:
		return "#f0c0c0"
	}
	return "#e0e0e0"
}

// Summary prints a few lines a person reads first: the verdict against the
// expectation, each checker's answer with its first anomalies, how late the
// harness ran, and where the files are.
func Summary(w io.Writer, r *engine.Result) {
	mark := "MATCHED"
	if !r.Matched {
		mark = "DID NOT MATCH"
	}
	fmt.Fprintf(w, "%s / %s: expected %s, observed %s — %s\n", r.Scenario, r.Lock, r.Expected, r.Outcome, mark)
	if r.Finding != "" {
		fmt.Fprintf(w, "  FINDING: %s\n", r.Finding)
	}
	if r.Explained != "" {
		fmt.Fprintf(w, "  expected: %s\n", r.Explained)
	}
	if r.Vacuous != "" {
		fmt.Fprintf(w, "  vacuous: %s (the checkers' verdicts below prove nothing either way)\n", r.Vacuous)
	}
	if r.Starved != "" {
		fmt.Fprintf(w, "  starved: %s (the checkers' verdicts below prove nothing either way)\n", r.Starved)
	} else if r.Late != "" {
		fmt.Fprintf(w, "  late: %s (the verdict stands: no fault ran, so lateness had no fault's window to move, and every checker passed)\n", r.Late)
	}
	if r.Waited > 0 {
		fmt.Fprintf(w, "  the story's fault waited %s for the lock attempts it needs before it (a step that waits moves the later ones and the time limit as far)\n",
			r.Waited.Round(time.Millisecond))
	}
	if r.EndedEarly {
		fmt.Fprintf(w, "  ended early: the story was over %s in, of its %s time limit (its faults ended, the allowance passed, its keys handed on; -full-time plays it whole)\n",
			r.Played.Round(time.Millisecond), r.TimeLimit)
	}
	for _, h := range headlines(r, Faults(r.Ops)) {
		fmt.Fprintf(w, "  %s\n", h)
	}
	for _, v := range r.Verdicts {
		fmt.Fprintf(w, "  %-13s %-8s", v.Checker, v.Valid)
		if len(v.Anomalies) > 0 {
			n := 0
			for _, c := range v.Counts {
				n += c
			}
			fmt.Fprintf(w, " %s", v.Anomalies[0].Text)
			if n > 1 {
				fmt.Fprintf(w, " (+%d more)", n-1)
			}
		}
		fmt.Fprintln(w)
	}
	if v, ok := r.Verdict(checker.ResourceName); ok {
		fmt.Fprintf(w, "  store: %d writes accepted, %d stale writes rejected, %d withheld (lease lost)\n", v.Details.WritesAccepted, v.Details.StaleWritesRejected, v.Details.WritesWithheld)
	}
	fmt.Fprintf(w, "  figures: %s\n", r.Figures)
	if sys := systemLine(r); sys != "" {
		fmt.Fprintf(w, "  system: %s\n", sys)
	}
	fmt.Fprintf(w, "  lateness: %s\n", latenessLine(r))
	if !r.Matched {
		// A CI log may be all that is left of a run that did not match:
		// what the nemesis did, and when, goes into it.
		for _, f := range Faults(r.Ops) {
			fmt.Fprintf(w, "  fault %s–%s %s\n", secs(f.Start), secs(f.End), f.Text())
		}
	}
	how := ""
	if r.Streamed {
		how = " (judged as a stream)"
	}
	fmt.Fprintf(w, "  %d ops in %s%s → %s\n", r.OpCount(), r.Elapsed, how, r.Dir)
}

// systemLine says how the run modelled a user's system, where it did: the
// workload's shape and the faults on an interval ("" for neither).
func systemLine(r *engine.Result) string {
	var parts []string
	if d := r.Workload.Hold; !d.IsZero() {
		parts = append(parts, "critical section "+d.String())
	}
	if d := r.Workload.Think; !d.IsZero() {
		parts = append(parts, "think "+d.String())
	}
	if r.Workload.Keys > 1 {
		parts = append(parts, fmt.Sprintf("%d keys", r.Workload.Keys))
	}
	if r.Workload.FenceReads {
		parts = append(parts, "the store checks tokens on reads")
	}
	if iv := r.Interval; iv != nil {
		parts = append(parts, fmt.Sprintf("faults %s every %s lasting %s", strings.Join(iv.Faults, ","), iv.Every, iv.For))
	}
	return strings.Join(parts, "; ")
}
