package engine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A process that starts at nice 0 moves every thread to Nice, and a
// process it starts afterwards runs at Nice too, where the kernel lets it
// (root); elsewhere it is refused and nothing moves. A process started at
// another nice keeps it. Each case is this test binary started afresh at
// the case's nice (TestPrioritizeHelper), since a nice value, once
// lowered, cannot be raised back without the privilege it took.
func TestPrioritizeMovesEveryThreadAndWhatItStarts(t *testing.T) {
	now, err := NiceNow()
	if err != nil {
		t.Fatal(err)
	}
	root := os.Geteuid() == 0
	for _, c := range []struct {
		from, want int
	}{
		{0, map[bool]int{true: Nice, false: 0}[root]},
		{3, 3},
	} {
		t.Run(fmt.Sprintf("from-%d", c.from), func(t *testing.T) {
			cmd := exec.Command("nice", "-n", strconv.Itoa(c.from-now), os.Args[0], "-test.run=^TestPrioritizeHelper$")
			cmd.Env = append(os.Environ(), "LOCKTORTURE_PRIORITIZE_HELPER=1")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			var from, got int
			var threads, child, refused string
			for _, line := range strings.Split(string(out), "\n") {
				fmt.Sscanf(line, "from %d", &from)
				fmt.Sscanf(line, "prioritized %d", &got)
				if rest, ok := strings.CutPrefix(line, "threads "); ok {
					threads = rest
				}
				if rest, ok := strings.CutPrefix(line, "child "); ok {
					child = rest
				}
				if rest, ok := strings.CutPrefix(line, "refused "); ok {
					refused = rest
				}
			}
			if from != c.from {
				t.Skipf("the helper started at nice %d, not %d (this process runs at %d without the privilege to lower it):\n%s", from, c.from, now, out)
			}
			want := strconv.Itoa(c.want)
			moved := threads != ""
			for _, n := range strings.Fields(threads) {
				moved = moved && n == want
			}
			if got != c.want || child != want || !moved {
				t.Fatalf("from nice %d: Prioritize says %d, threads at %q, a child at %q, want all %d (refused: %q):\n%s", c.from, got, threads, child, c.want, refused, out)
			}
			if (refused != "") != (c.from == 0 && !root) {
				t.Fatalf("from nice %d as uid %d: refused %q", c.from, os.Geteuid(), refused)
			}
		})
	}
}

// TestPrioritizeHelper is the process TestPrioritizeMovesEveryThread
// starts: it runs Prioritize and prints its nice before and after, every
// thread's, and that of a process it starts.
func TestPrioritizeHelper(t *testing.T) {
	if os.Getenv("LOCKTORTURE_PRIORITIZE_HELPER") != "1" {
		t.Skip("started by TestPrioritizeMovesEveryThreadAndWhatItStarts")
	}
	from, _ := NiceNow()
	fmt.Printf("from %d\n", from)
	got, err := Prioritize()
	fmt.Printf("prioritized %d\n", got)
	if err != nil {
		fmt.Printf("refused %v\n", err)
	}
	stats, _ := filepath.Glob("/proc/self/task/*/stat")
	var threads []string
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		// The fields after the command's closing parenthesis; nice is the
		// stat file's 19th field, the 17th of these.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		threads = append(threads, f[16])
	}
	fmt.Printf("threads %s\n", strings.Join(threads, " "))
	out, err := exec.Command("nice").Output() // with no command, nice prints its own
	fmt.Printf("child %s\n", strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
}
