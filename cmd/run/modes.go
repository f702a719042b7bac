package main

// What run can do, one mode each, and the flags each reads. A flag a
// mode does not read would be ignored without a word, and the run would
// not be the one asked for; so a mode refuses every flag it does not
// declare, in one line built from the declaration.

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
)

// A mode is one thing run does, named by a flag of its own (the matrix,
// by none: it is what runs when no other is named).
type mode struct {
	// flag names the mode; "" for the matrix.
	flag string
	// does says what the mode does, in the line that refuses a flag: "-flag
	// does: drop -x".
	does string
	// takes lists the flags the mode reads besides its own. Every other
	// flag given is refused; a mode that takes -out writes under it, which
	// is checked to be writable before the mode starts.
	takes []string
	// run carries the mode out, once run has checked its flags (refuse,
	// badValue, -out writable): exit 0, 1, 2 or 130 as main says.
	run func(ctx context.Context, f *flags, stdout, stderr io.Writer) int
}

// runFlags are the flags that shape each run a mode starts: the engine's
// options, the locks and how many runs go at once.
var runFlags = []string{"lock", "clients", "ttl", "time-limit", "full-time", "spawn-workers", "seed", "out", "backend", "client-procs", "parallel",
	"hold", "think", "keys", "fence-reads", "faults", "fault-every", "fault-for"}

// modes are the modes named by a flag. When two are named, the one first
// in this list runs, and refuses the other's flag (-sweep with -explore is
// refused by -sweep).
var modes = []mode{listMode, printMode, checkMode, shrinkMode, mergeMode, fileMode, sweepMode, exploreMode}

// pick is the mode the flags name: the first of modes whose flag is
// given, else the matrix.
func pick(f *flags) mode {
	for _, m := range modes {
		if f.has(m.flag) {
			return m
		}
	}
	return matrixMode
}

// refuse says, in one line, which flags given m does not take, or "" when
// it takes every one. The matrix runs when no mode is named, so a flag it
// refuses belongs to a mode left out: it says which modes take it. Every
// mode takes -v: it asks for more output, never for other work, and a
// script that passes it to every run keeps working where there is nothing
// more to print.
func (m mode) refuse(f *flags) string {
	var extra []string
	for _, name := range f.given {
		if name != m.flag && name != "v" && !slices.Contains(m.takes, name) {
			extra = append(extra, "-"+name)
		}
	}
	switch {
	case len(extra) == 0:
		return ""
	case m.flag != "":
		return fmt.Sprintf("-%s %s: drop %s", m.flag, m.does, list(extra, "and"))
	}
	var takers []string
	for _, o := range modes {
		if slices.Contains(o.takes, extra[0][1:]) {
			takers = append(takers, "-"+o.flag)
		}
	}
	if len(takers) == 1 {
		return fmt.Sprintf("%s goes with %s: give it too", extra[0], takers[0])
	}
	return fmt.Sprintf("%s goes with %s: give one of them too", extra[0], list(takers, "or"))
}

// list joins words as a sentence does: "a", "a and b", "a, b and c".
func list(words []string, conj string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " " + conj + " " + words[len(words)-1]
}
