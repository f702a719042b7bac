package docgen

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/locktorture/locktorture/locks"
)

// lockTable is generated/locks.md: every registered lock, built-in or
// registered by locks/library and locks/services.
func lockTable() (string, error) {
	var b strings.Builder
	b.WriteString("# The locks\n\n")
	b.WriteString("Every registered lock (`locks.Names`, each `locks.Info`): the reference locks of package `locks`, " +
		"the installed libraries (`locks/library`) and the lock services (`locks/services`), as `go run ./cmd/run -list` lists them. " +
		"**Claims** are the kinds of fault under which the lock claims to keep its promise: random and boundary exploration hold it to these " +
		"and no more. What each lock shows under each story: [stories](stories.md), [comparison](comparison.md); " +
		"the prose about them: [locks](../locks.md), [lock services](../lock-services.md).\n\n")
	b.WriteString(headerRow(lockColumns...))
	for _, name := range locks.Names() {
		info, err := locks.Lookup(name)
		if err != nil {
			return "", err
		}
		b.WriteString(row(lockRow(info)...))
	}
	return b.String(), nil
}

// lockColumns are the columns lockRow fills, in order: the traits the
// stories judge by (locks.Traits) beside what else Info says.
var lockColumns = []string{"lock", "server", "nodes", "ends", "release", "clock", "traits", "library", "fenced", "reentrant", "claims", "notes", "summary"}

// lockRow is one lock's cells, in lockColumns' order.
func lockRow(info locks.Info) []string {
	name := code(info.Name)
	if info.Broken {
		name += " (broken on purpose)"
	}
	library := info.Library
	if library != "" {
		library = code(library)
	}
	return []string{
		name,
		info.ServerKind(),
		fmt.Sprint(info.Nodes),
		string(info.Traits.Ends),
		string(info.Traits.Release),
		string(info.Traits.Clock),
		strings.Join(traitWords(info.Traits), ", "),
		library,
		yes(info.Fenced),
		yes(info.Reentrant),
		info.ClaimList(),
		strings.Join(lockNotes(info), "; "),
		info.Summary,
	}
}

// lockNotes are what else a lock's Info says about how it is run.
func lockNotes(info locks.Info) []string {
	var notes []string
	if info.Program != nil {
		notes = append(notes, "a worker process per client")
	}
	if info.Queued {
		notes = append(notes, "waiters queue (a dead one holds the others up to the waiter timeout)")
	}
	if info.NodeTimeout {
		notes = append(notes, "bounds each node's reply (replies later than that starve a run)")
	}
	if info.MinTTL > 0 {
		notes = append(notes, "shortest lease "+info.MinTTL.String())
	}
	return notes
}

// traitWords are the names (as results.json spells them) of the yes-or-no
// traits the lock has.
func traitWords(t locks.Traits) []string {
	var out []string
	v := reflect.ValueOf(t)
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Bool && f.Bool() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			out = append(out, name)
		}
	}
	return out
}
