package engine

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/internal/procstat"
	"github.com/locktorture/locktorture/worker"
)

// pyWorker is a Python worker that keeps to the protocol until its
// release, where it does as its second argument says: "stray" answers an
// id nobody asked for, "hang" never answers. It is enough of a lock
// (every acquire granted) for a client to reach its release.
const pyWorker = `
import json, os, sys
with open(sys.argv[1], "a") as f:
    f.write("%d\n" % os.getpid())
for line in sys.stdin:
    req = json.loads(line)
    if req["op"] == "release":
        if sys.argv[2] == "stray":
            print(json.dumps({"id": req["id"] + 1000}), flush=True)
        continue
    rep = {"id": req["id"]}
    if req["op"] == "acquire":
        rep["lease"] = {"key": req["key"], "token": "t"}
    print(json.dumps(rep), flush=True)
`

// A worker that breaks the protocol, in whatever language (sh and Python
// here), fails its pair in one line with the outcome error, never a verdict and never a hang, and
// leaves no process behind, a child of its own included, nor a temp dir.
func TestMisbehavingWorkersFailTheirRun(t *testing.T) {
	pids, out := filepath.Join(t.TempDir(), "pids"), t.TempDir()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // every temp dir the runs make, to find any left
	// sh starts each of its workers with a child of its own (a sleep)
	// that must die with it.
	sh := func(script string) func(string) *exec.Cmd {
		return func(string) *exec.Cmd {
			return exec.Command("sh", "-c", "echo $$ >>"+pids+"; sleep 600 & echo $! >>"+pids+"; "+script)
		}
	}
	py := func(how string) func(string) *exec.Cmd {
		return func(string) *exec.Cmd { return exec.Command("/usr/bin/python3", "-c", pyWorker, pids, how) }
	}
	for _, c := range []struct {
		name   string
		worker func(string) *exec.Cmd
		lock   string
		want   string
	}{
		{"silent at hello", sh("wait"), "set-nx-px", "left hello unanswered"},
		{"exits at start", sh("exit 3"), "set-nx-px", "exit status 3"},
		{"malformed line", sh(`read l; echo '{"id": nope'; wait`), "set-nx-px", "not the protocol's JSON"},
		{"endless line", sh(`read l; head -c 3000000 /dev/zero | tr '\0' '{'; wait`), "set-nx-px", "longer than"},
		{"unknown id", py("stray"), "set-nx-px", "answered request"},
		{"hangs in release", py("hang"), "set-nx-px", "left release unanswered"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := Run(context.Background(), Options{Scenario: "baseline", Lock: c.lock, ClientProcs: true, Worker: c.worker,
				WorkerPatience: 3 * time.Second, Clients: 2, TTL: 500 * time.Millisecond, TimeLimit: 2 * time.Second, Out: out})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one naming %q", err, c.want)
			}
			if line := err.Error(); strings.Contains(line, "\n") {
				t.Errorf("the error is more than one line: %q", line)
			}
			if c.name != "exits at start" && !errors.Is(err, worker.ErrMisbehaved) {
				t.Errorf("err = %v, want worker.ErrMisbehaved", err)
			}
			if res != nil && res.Judgement.Outcome != "" {
				t.Errorf("a run with a misbehaving worker was judged: %s", res.Judgement.Outcome)
			}
		})
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) > 0 {
		t.Errorf("temp dirs left behind: %v", left)
	}
	data, _ := os.ReadFile(pids)
	for _, f := range strings.Fields(string(data)) {
		pid, _ := strconv.Atoi(f)
		if alive(pid) {
			t.Errorf("process %d of a misbehaving worker is still running", pid)
		}
	}
}

// alive says whether pid runs (a zombie waiting for its parent does not).
func alive(pid int) bool {
	s := procstat.State(pid)
	return s != "" && s != "Z"
}
