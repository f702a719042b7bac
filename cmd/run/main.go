// Command run runs named failure scenarios against named lock algorithms on
// real Redis and says whether each behaved as expected.
//
//	go run ./cmd/run -scenario paused-holder -lock set-nx-px
//
// Each pair gets one line as it ends (its place, verdict, time and the time
// left); the block behind a verdict (log, checkers, files) is printed for a
// pair that did not match, or for every pair with -v. On a terminal a status
// line shows the pairs running now.
//
// Besides the matrix (of -scenario × -lock, or the pairs -pairs names),
// run has modes named by a flag (-list, -print-scenario, -check, -shrink,
// -merge, -scenario-file, -sweep, -explore), each in a file of its own;
// modes.go says which flags each one takes.
//
// Exit status: 0 every outcome matched its expectation, 1 some did not (or a
// run could not be carried out), 2 bad usage, 130 interrupted.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/worker"
)

func main() {
	register()
	// Started as a client worker (-client-procs): serve the lock, then exit.
	worker.ServeIfWorker(locks.Lookup)
	// The harness's heap is a few runs' histories, small beside the
	// servers it starts: a collection at five times the live heap instead
	// of twice marks it a quarter as often, and the marking was a tenth
	// of the harness's CPU, which the stories beside it lose (a 50-pair
	// Redis matrix's resident peak went from 110 to 188 MB). GOGC, when
	// set, decides.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// A reader of our output that dies first (run | grep, both signalled
	// at once) must not kill the run by SIGPIPE mid-cleanup, leaving its
	// servers' directories behind: a write to it fails instead.
	signal.Ignore(syscall.SIGPIPE)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process: flags in, exit code out. It picks the
// mode the flags name, and hands over once the mode's flags pass: every
// flag given is one the mode takes, and none is zero or empty.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, code := parseFlags(args, stdout, stderr)
	if f == nil {
		return code
	}
	m := pick(f)
	if why := cmp.Or(m.refuse(f), f.badValue()); why != "" {
		fmt.Fprintf(stderr, "run: %s\n", why)
		return 2
	}
	if slices.Contains(m.takes, "out") {
		if err := writable(f.out); err != nil {
			fmt.Fprintf(stderr, "run: -out %s: %v\n", f.out, err)
			return 2
		}
	}
	return m.run(ctx, f, stdout, stderr)
}

// split reads a comma-separated flag: its names, trimmed, with the empty
// ones left out.
func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// isTerminal says whether w is a terminal: a status line redrawn in place
// is for people watching, not for CI logs and pipes, which get plain lines.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// writable checks that dir can be made and written to before anything
// starts, so a bad -out costs one line, not a matrix of errors.
func writable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return errors.Unwrap(err)
	}
	f, err := os.CreateTemp(dir, ".writable-*")
	if err != nil {
		return errors.Unwrap(err)
	}
	f.Close()
	return os.Remove(f.Name())
}
