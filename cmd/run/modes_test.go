package main

import (
	"bytes"
	"context"
	"flag"
	"github.com/locktorture/locktorture/workloads"
	"slices"
	"strings"
	"testing"
	"time"
)

// sampleArgs is flag name given a value of its kind: what the parse takes,
// whatever a mode later makes of it.
func sampleArgs(name string) []string {
	switch newFlags().set.Lookup(name).Value.(flag.Getter).Get().(type) {
	case bool:
		return []string{"-" + name}
	case int, int64:
		return []string{"-" + name, "3"}
	case time.Duration, workloads.Dist:
		return []string{"-" + name, "1s"}
	case []string:
		return []string{"-" + name, "pause"}
	}
	return []string{"-" + name, "x"}
}

// runArgs runs the command on args and returns its exit code and stderr.
func runArgs(args ...string) (int, string) {
	var errb bytes.Buffer
	code := run(context.Background(), args, &bytes.Buffer{}, &errb)
	return code, errb.String()
}

// Each mode refuses, with one line and exit 2 before anything starts, every
// flag it does not declare but -v, which every mode takes; the line names the flag, and the mode with
// what it does. A flag of a mode earlier in the list would pick that mode
// instead, so it is not tried.
func TestEveryModeRefusesAFlagItDoesNotTake(t *testing.T) {
	var all []string
	newFlags().set.VisitAll(func(f *flag.Flag) { all = append(all, f.Name) })
	tried := 0
	for k, m := range append(slices.Clone(modes), matrixMode) {
		for _, name := range all {
			earlier := slices.ContainsFunc(modes[:min(k, len(modes))], func(o mode) bool { return o.flag == name })
			if name == m.flag || name == "v" || slices.Contains(m.takes, name) || earlier {
				continue
			}
			args := sampleArgs(name)
			if m.flag != "" {
				args = append(sampleArgs(m.flag), args...)
			}
			code, msg := runArgs(args...)
			want := "-" + m.flag + " " + m.does + ": drop -" + name + "\n"
			if m.flag == "" {
				want = "-" + name + " goes with "
			}
			if code != 2 || strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "run: "+want) {
				t.Errorf("%v: exit %d, %q; want 2 and one line starting %q", args, code, msg, "run: "+want)
			}
			tried++
		}
	}
	if tried < 50 {
		t.Fatalf("only %d refusals tried", tried)
	}
}

// The declarations name real flags, and every flag is read somewhere: a
// mode's own, or one some mode takes (so the matrix's refusal can say
// which mode to give).
func TestModesDeclareRealFlags(t *testing.T) {
	fs := newFlags().set
	read := map[string]bool{}
	for _, m := range append(slices.Clone(modes), matrixMode) {
		if m.flag != "" && fs.Lookup(m.flag) == nil {
			t.Errorf("mode -%s: no such flag", m.flag)
		}
		read[m.flag] = true
		for _, name := range m.takes {
			if fs.Lookup(name) == nil {
				t.Errorf("mode -%s takes -%s: no such flag", m.flag, name)
			}
			if slices.ContainsFunc(modes, func(o mode) bool { return o.flag == name }) {
				t.Errorf("mode -%s takes -%s, which names a mode of its own", m.flag, name)
			}
			read[name] = true
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !read[f.Name] {
			t.Errorf("-%s is read by no mode", f.Name)
		}
	})
}

// The lines users saw for the combinations refused before the modes were
// declared say the same: which mode, what it does, what to drop (only the
// flags given), and for -runs alone which mode to give.
func TestRefusalsSayWhatToDropOrGive(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-scenario-file", "f", "-scenario", "a"}, "run: -scenario-file names the stories to run: drop -scenario\n"},
		{[]string{"-scenario-file", "f", "-sweep", "p=1..2", "-probe", "p", "-explore"}, "run: -scenario-file names the stories to run: drop -explore, -probe and -sweep\n"},
		{[]string{"-sweep", "pause=1..2", "-explore", "-lock", "set-nx-px"}, "run: -sweep runs one story over a range of one parameter: drop -explore\n"},
		{[]string{"-sweep", "pause=1..2", "-service", "redis", "-probe", "p"}, "run: -sweep runs one story over a range of one parameter: drop -probe and -service\n"},
		{[]string{"-explore", "-lock", "set-nx-px", "-shard", "1/2"}, "run: -explore picks its own runs (scenario boundary at each boundary it learns): drop -shard\n"},
		{[]string{"-runs", "3"}, "run: -runs goes with -shrink or -sweep: give one of them too\n"},
		{[]string{"-scenario", "paused-holder", "-lock", "set-nx-px", "-runs", "3"}, "run: -runs goes with -shrink or -sweep: give one of them too\n"},
		// A boolean set false is as good as absent.
		{[]string{"-sweep", "pause=1..2", "-explore=false", "-scenario", "a,b"}, "run: -sweep runs one story: name it with -scenario\n"},
		// A mode's own flag empty is a typo, not that mode left out (which
		// would start the whole matrix).
		{[]string{"-check", ""}, "run: -check is empty (omit the flag for the default)\n"},
		{[]string{"-print-scenario", " "}, "run: -print-scenario is empty (omit the flag for the default)\n"},
		{[]string{"-shard", ""}, "run: -shard is empty (omit the flag for the default)\n"},
	}
	for _, c := range cases {
		if code, msg := runArgs(c.args...); code != 2 || msg != c.want {
			t.Errorf("%q: exit %d, %q; want 2, %q", c.args, code, msg, c.want)
		}
	}
	if code, msg := runArgs("-list", "-explore=false", "-v=false"); code != 0 {
		t.Errorf("-list with booleans set false: exit %d, %q", code, msg)
	}
}

func TestHelpPrintsUsageAndExits0(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &out, &bytes.Buffer{}); code != 0 ||
		!strings.HasPrefix(out.String(), usageLine+"\n") || !strings.Contains(out.String(), "-scenario-file FILE") {
		t.Fatalf("-h: exit %d:\n%s", code, out.String())
	}
}

// Every mode takes -v, as every mode did before modes declared their
// flags: a script that passes it to every run keeps working.
func TestEveryModeTakesV(t *testing.T) {
	if code, msg := runArgs("-list", "-v"); code != 0 {
		t.Errorf("-list -v: exit %d, %q", code, msg)
	}
	if code, msg := runArgs("-print-scenario", "baseline", "-v"); code != 0 {
		t.Errorf("-print-scenario baseline -v: exit %d, %q", code, msg)
	}
}
