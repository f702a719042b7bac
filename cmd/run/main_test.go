package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/docker"
	"github.com/locktorture/locktorture/history"
)

func TestUsageErrorsExit2WithOneLine(t *testing.T) {
	cases := map[string][]string{
		"unknown scenario": {"-scenario", "nope"},
		"unknown lock":     {"-scenario", "baseline", "-lock", "nope"},
		"bad duration":     {"-ttl", "soon"},
		"unknown flag":     {"-frobnicate"},
		"stray argument":   {"baseline"},
		"too few clients":  {"-scenario", "baseline", "-clients", "1"},
		"too short":        {"-scenario", "paused-holder", "-time-limit", "1s"},
		"zero ttl":         {"-ttl", "0"},
		"zero clients":     {"-clients", "0"},
		"zero time limit":  {"-time-limit", "0s"},
		"empty lock":       {"-lock", ""},
		"zero parallel":    {"-parallel", "0"},
		"random, no lock":  {"-scenario", "random"},
		"all and more":     {"-scenario", "random,all"},
		"bad shard":        {"-shard", "3/2"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), append(args, "-out", t.TempDir()), &out, &errb)
			if code != 2 {
				t.Fatalf("exit %d, want 2 (stderr %q)", code, errb.String())
			}
			msg := errb.String()
			if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "run: ") {
				t.Fatalf("want one line on stderr, got %q", msg)
			}
		})
	}
	t.Run("unwritable out", func(t *testing.T) {
		var errb bytes.Buffer
		if code := run(context.Background(), []string{"-out", "/proc/locktorture"}, &bytes.Buffer{}, &errb); code != 2 ||
			strings.Count(errb.String(), "\n") != 1 {
			t.Fatalf("exit %d, stderr %q: want 2 and one line", code, errb.String())
		}
	})
	var errb bytes.Buffer
	run(context.Background(), []string{"-scenario", "nope"}, &bytes.Buffer{}, &errb)
	if !strings.Contains(errb.String(), "paused-holder") {
		t.Fatalf("unknown scenario error must list the valid names: %q", errb.String())
	}
}

func TestListNamesEverything(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"-list"}, &out, &bytes.Buffer{}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"baseline", "paused-holder", "set-nx-px", "set-nx-px-fenced"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-list does not mention %s", want)
		}
	}
}

func TestMatchedRunExits0AndWritesFiles(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	code := run(context.Background(), []string{"-scenario", "baseline", "-lock", "set-nx-px", "-time-limit", "1s", "-out", dir}, &out, &bytes.Buffer{})
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
	if bytes.Contains(out.Bytes(), []byte("\r")) {
		t.Fatal("a status line was drawn on output that is not a terminal")
	}
	if _, err := os.Stat(filepath.Join(dir, "index.html")); err != nil {
		t.Errorf("results/index.html not written: %v", err)
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "baseline", "set-nx-px", "*"))
	if len(runs) != 1 {
		t.Fatalf("want one run dir, got %v", runs)
	}
	var res map[string]any
	b, err := os.ReadFile(filepath.Join(runs[0], "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"scenario", "lock", "expected", "outcome", "matched", "checkers"} {
		if _, ok := res[k]; !ok {
			t.Errorf("results.json lacks %q", k)
		}
	}
	if res["matched"] != true {
		t.Errorf("matched = %v", res["matched"])
	}
	html, err := os.ReadFile(filepath.Join(runs[0], "timeline.html"))
	if err != nil || !bytes.Contains(html, []byte("<html")) {
		t.Fatalf("timeline.html missing or not HTML: %v", err)
	}
}

// Two shards of a selection, run side by side, merge into one matrix whose
// every entry points at a run directory under the merged -out.
func TestShardsRunInParallelAndMerge(t *testing.T) {
	base := []string{"-scenario", "baseline", "-lock", "set-nx-px,mutex,none", "-time-limit", "1s", "-parallel", "2"}
	var dirs []string
	for _, shard := range []string{"1/2", "2/2"} {
		dir := t.TempDir()
		var out bytes.Buffer
		code := run(context.Background(), append(base, "-shard", shard, "-out", dir), &out, &bytes.Buffer{})
		if code != 0 {
			t.Fatalf("shard %s: exit %d:\n%s", shard, code, out.String())
		}
		dirs = append(dirs, dir)
	}
	merged := t.TempDir()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-merge", dirs[0] + "," + dirs[1], "-out", merged}, &out, &errb); code != 0 {
		t.Fatalf("merge: exit %d: %s%s", code, out.String(), errb.String())
	}
	var m struct {
		Total, Matched int
		Entries        []struct{ Lock, Dir string }
	}
	b, err := os.ReadFile(filepath.Join(merged, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Total != 3 || m.Matched != 3 {
		t.Fatalf("merged %d entries, %d matched; want 3 and 3:\n%s", m.Total, m.Matched, out.String())
	}
	for _, e := range m.Entries {
		if _, err := os.Stat(filepath.Join(e.Dir, "results.json")); err != nil || !strings.HasPrefix(e.Dir, merged) {
			t.Errorf("%s: run dir %q not under the merged out: %v", e.Lock, e.Dir, err)
		}
	}
	// A set with a shard missing is refused.
	if code := run(context.Background(), []string{"-merge", dirs[0], "-out", t.TempDir()}, &bytes.Buffer{}, &errb); code != 1 ||
		!strings.Contains(errb.String(), "2/2 missing") {
		t.Fatalf("merge of one of two shards: exit %d, %q", code, errb.String())
	}
}

// asCommand, set in a child's environment, makes this test binary run the
// command's main instead of the tests.
const asCommand = "LOCKTORTURE_TEST_AS_RUN"

// TestMain lets the test binary stand in for the command: the tests that
// need a real process (signals, exit codes, cleanup after SIGKILL) start
// this binary again, which runs main, so no second binary is linked while
// other stories run on the machine.
func TestMain(m *testing.M) {
	if os.Getenv(asCommand) != "" {
		main()
	}
	// Every child these tests start is the command.
	os.Setenv(asCommand, "1")
	os.Exit(m.Run())
}

// buildRun is the path of a binary that runs as the command.
func buildRun(t *testing.T) string {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// startLongRun starts the binary on a run that would last a minute and
// waits until it has recorded ops, returning the run dir and the temp dir
// the run keeps its node data in (the test's own: a harness killed with
// SIGKILL cannot clean up after itself, and must not litter /tmp).
func startLongRun(t *testing.T, bin string, args ...string) (*exec.Cmd, string, string) {
	t.Helper()
	out, tmp := t.TempDir(), t.TempDir()
	cmd := exec.Command(bin, append([]string{"-scenario", "baseline", "-lock", "set-nx-px", "-time-limit", "1m", "-out", out}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		dirs, _ := filepath.Glob(filepath.Join(out, "baseline", "set-nx-px", "*"))
		if len(dirs) == 1 {
			if st, err := os.Stat(filepath.Join(dirs[0], "history.jsonl")); err == nil && st.Size() > 10000 {
				if _, err := os.Stat(filepath.Join(dirs[0], "cluster.json")); err == nil {
					return cmd, dirs[0], tmp
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("run never started recording")
	return nil, "", ""
}

func nodePIDs(t *testing.T, dir string) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
	if err != nil {
		t.Fatal(err)
	}
	var nodes []cluster.NodeInfo
	if err := json.Unmarshal(b, &nodes); err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, n := range nodes {
		pids = append(pids, n.PID)
	}
	if len(pids) == 0 {
		t.Fatal("cluster.json lists no nodes")
	}
	return pids
}

// redisAlive reports whether pid is still a live redis-server.
func redisAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z" && strings.Contains(f[1], "redis")
}

func waitGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for redisAlive(pid) {
			if time.Now().After(deadline) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("redis-server pid %d outlived the harness", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func TestCtrlCLeavesNoRedisAndAReadableHistory(t *testing.T) {
	bin := buildRun(t)
	cmd, dir, tmp := startLongRun(t, bin)
	pids := nodePIDs(t, dir)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("want exit 130 after SIGINT, got %v", err)
	}
	waitGone(t, pids)
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Fatalf("the interrupted run left %s/%s behind", tmp, left[0].Name())
	}
	ops, err := history.LoadFile(filepath.Join(dir, "history.jsonl"))
	if err != nil || len(ops) == 0 {
		t.Fatalf("partial history unreadable: %d ops, %v", len(ops), err)
	}
	// The interrupted run is in the index, said to be interrupted.
	index, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(dir))), "index.html"))
	if err != nil || !bytes.Contains(index, []byte("interrupted")) {
		t.Fatalf("results/index.html does not list the interrupted run: %v", err)
	}
}

func TestKilledHarnessTakesRedisWithIt(t *testing.T) {
	bin := buildRun(t)
	cmd, dir, tmp := startLongRun(t, bin)
	pids := nodePIDs(t, dir)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	waitGone(t, pids)
	ops, err := history.LoadFile(filepath.Join(dir, "history.jsonl"))
	if len(ops) == 0 || (err != nil && !errors.Is(err, history.ErrTruncated)) {
		t.Fatalf("history after kill -9: %d ops, %v", len(ops), err)
	}
	// The killed harness could not remove its temp dir; the next run does,
	// and says so.
	left, _ := filepath.Glob(filepath.Join(tmp, "locktorture-*"))
	if len(left) != 1 {
		t.Fatalf("want the killed run's temp dir left behind, found %v", left)
	}
	next := exec.Command(bin, "-scenario", "baseline", "-lock", "mutex", "-time-limit", "1s", "-out", t.TempDir())
	next.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := next.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "removed 1 temp dir(s) left by runs that were killed") {
		t.Fatalf("next run: %v\n%s", err, out)
	}
	if _, err := os.Stat(left[0]); !os.IsNotExist(err) {
		t.Fatalf("%s still there after the next run: %v", left[0], err)
	}
}

// workerPIDs lists the running processes of bin other than the harness
// and this test process (bin is this test binary): its client workers.
func workerPIDs(t *testing.T, bin string, harness int) []int {
	t.Helper()
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == harness || pid == os.Getpid() {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == bin {
			pids = append(pids, pid)
		}
	}
	return pids
}

// With -client-procs the binary is its own worker: the story matches with
// every client a process of its own, and a harness killed with SIGKILL
// takes its workers with it.
func TestClientProcsRunAndDieWithTheHarness(t *testing.T) {
	bin := buildRun(t)
	out, err := exec.Command(bin, "-client-procs", "-scenario", "paused-holder", "-lock", "set-nx-px", "-out", t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("paused-holder with -client-procs: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-client-procs", "-scenario", "baseline", "-lock", "set-nx-px", "-time-limit", "1m", "-out", t.TempDir())
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	deadline := time.Now().Add(20 * time.Second)
	for len(workerPIDs(t, bin, cmd.Process.Pid)) < 5 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(workerPIDs(t, bin, cmd.Process.Pid)); n < 5 {
		t.Fatalf("%d workers running, want one per client (5)", n)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	deadline = time.Now().Add(5 * time.Second)
	for len(workerPIDs(t, bin, cmd.Process.Pid)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := workerPIDs(t, bin, cmd.Process.Pid); len(left) > 0 {
		t.Fatalf("workers %v outlived the harness killed with SIGKILL", left)
	}
}

// labelled lists what the docker engine holds with label=value: containers,
// volumes and networks, as "kind name" lines.
func labelled(t *testing.T, pool *dockertest.Pool, label, value string) []string {
	t.Helper()
	f := map[string][]string{"label": {label + "=" + value}}
	var out []string
	cs, err := pool.Client.ListContainers(dc.ListContainersOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		out = append(out, "container "+strings.Join(c.Names, ","))
	}
	vs, err := pool.Client.ListVolumes(dc.ListVolumesOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		out = append(out, "volume "+v.Name)
	}
	ns, err := pool.Client.FilteredListNetworks(dc.NetworkFilterOpts{"label": {label + "=" + value: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		out = append(out, "network "+n.Name)
	}
	return out
}

// A docker run stopped with Ctrl-C removes every container, volume and
// network it labelled; one killed with SIGKILL cannot, and the next docker
// run removes them, saying so.
func TestDockerRunLeavesNothingLabelled(t *testing.T) {
	pool, err := docker.Pool()
	if err != nil {
		t.Skipf("docker backend not tested: %v", err)
	}
	bin := buildRun(t)
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGKILL} {
		cmd, _, _ := startLongRun(t, bin, "-backend", "docker")
		pid := strconv.Itoa(cmd.Process.Pid)
		if got := labelled(t, pool, docker.LabelPID, pid); len(got) < 3 {
			t.Fatalf("a running docker run should have labelled its nodes, volumes and network: %v", got)
		}
		_ = cmd.Process.Signal(sig)
		_ = cmd.Wait()
		left := labelled(t, pool, docker.LabelPID, pid)
		if sig == os.Interrupt {
			if len(left) > 0 {
				t.Fatalf("after SIGINT the run left %v", left)
			}
			continue
		}
		if len(left) == 0 {
			t.Fatal("want the killed run's containers left behind for the next run to find")
		}
		next := exec.Command(bin, "-backend", "docker", "-scenario", "baseline", "-lock", "mutex", "-time-limit", "1s", "-out", t.TempDir())
		out, err := next.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "removed a dead run's leftovers: run "+pid+"-") {
			t.Fatalf("next run: %v\n%s", err, out)
		}
		if left := labelled(t, pool, docker.LabelPID, pid); len(left) > 0 {
			t.Fatalf("after the next run, still there: %v", left)
		}
	}
}
