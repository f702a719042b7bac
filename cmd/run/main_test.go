package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/docker"
	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/internal/procstat"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
)

func TestUsageErrorsExit2WithOneLine(t *testing.T) {
	cases := map[string][]string{
		"unknown scenario":  {"-scenario", "nope"},
		"unknown lock":      {"-scenario", "baseline", "-lock", "nope"},
		"bad duration":      {"-ttl", "soon"},
		"unknown flag":      {"-frobnicate"},
		"stray argument":    {"baseline"},
		"too few clients":   {"-scenario", "baseline", "-clients", "1"},
		"too short":         {"-scenario", "paused-holder", "-time-limit", "1s"},
		"zero ttl":          {"-ttl", "0"},
		"zero clients":      {"-clients", "0"},
		"zero time limit":   {"-time-limit", "0s"},
		"empty lock":        {"-lock", ""},
		"zero parallel":     {"-parallel", "0"},
		"random, no lock":   {"-scenario", "random"},
		"all and more":      {"-scenario", "random,all"},
		"bad shard":         {"-shard", "3/2"},
		"unknown service":   {"-service", "mysql"},
		"service, no pair":  {"-scenario", "leader-failover", "-service", "postgres"},
		"print unknown":     {"-print-scenario", "nope"},
		"print a drawn one": {"-print-scenario", "random"},
		"missing file":      {"-scenario-file", "/nonexistent/story.json"},
		"file and scenario": {"-scenario-file", "x.json", "-scenario", "baseline"},
		"range upside down": {"-scenario", "interval", "-lock", "set-nx-px", "-hold", "300ms..80ms"},
		"no mean":           {"-scenario", "baseline", "-lock", "set-nx-px", "-think", "exp:"},
		"unknown fault":     {"-scenario", "interval", "-lock", "set-nx-px", "-faults", "pause,gc"},
		"zero keys":         {"-keys", "0"},
		"too many keys":     {"-scenario", "baseline", "-lock", "set-nx-px", "-keys", "17"},
		"interval, no kind": {"-scenario", "interval", "-lock", "set-nx-px"},
		"interval, no time": {"-scenario", "interval", "-lock", "set-nx-px", "-faults", "pause", "-fault-for", "1s"},
		"faults, scripted":  {"-scenario", "baseline", "-lock", "set-nx-px", "-faults", "pause", "-fault-every", "1s", "-fault-for", "1s"},
		"sweep half a key":  {"-scenario", "baseline", "-lock", "set-nx-px", "-sweep", "keys=1..4:3"},
		"sweep one client":  {"-scenario", "baseline", "-lock", "set-nx-px", "-sweep", "clients=1..4"},
		"kill, no server":   {"-scenario", "interval", "-lock", "mutex", "-faults", "kill", "-fault-every", "1s", "-fault-for", "1s"},
		"pairs, no slash":   {"-pairs", "baseline"},
		"pairs, two":        {"-pairs", "baseline/set-nx-px/zk"},
		"pairs, no lock":    {"-pairs", "baseline/"},
		"pairs, none":       {"-pairs", ","},
		"pairs, unknown":    {"-pairs", "baseline/nope"},
		"pairs and lock":    {"-pairs", "baseline/set-nx-px", "-lock", "zk"},
		"pairs and story":   {"-pairs", "baseline/set-nx-px", "-scenario", "baseline"},
		"pairs in a sweep":  {"-pairs", "baseline/set-nx-px", "-sweep", "ttl=500..1000"},
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
	run(context.Background(), []string{"-scenario", "nope", "-out", t.TempDir()}, &bytes.Buffer{}, &errb)
	if !strings.Contains(errb.String(), "paused-holder") {
		t.Fatalf("unknown scenario error must list the valid names: %q", errb.String())
	}
}

// -service keeps the pairs whose lock runs on the named kinds, and only
// those: the Makefile splits the matrix by it.
func TestServiceKeepsOnlyItsLocks(t *testing.T) {
	pairs, err := plan("all", "", only{kinds: []string{"postgres", "memcached"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range pairs {
		info, _ := locks.Lookup(p[1])
		if k := info.ServerKind(); k != "postgres" && k != "memcached" {
			t.Fatalf("pair %s/%s runs on %s", p[0], p[1], k)
		}
		seen[p[1]] = true
	}
	for _, want := range []string{"pg-advisory", "pg-lease", "memcached-add"} {
		if !seen[want] {
			t.Fatalf("no pair of %s in %v", want, pairs)
		}
	}
	all, _ := plan("all", "", only{}, nil)
	redis, _ := plan("all", "", only{kinds: []string{"redis"}}, nil)
	if len(redis) == 0 || len(redis)+len(pairs) >= len(all) {
		t.Fatalf("redis %d + postgres and memcached %d pairs of %d: ZooKeeper's and etcd's are missing", len(redis), len(pairs), len(all))
	}
}

// -pairs runs exactly the pairs it names, once each, in its order, all
// on either side reading as -scenario all and -lock's default do.
func TestPairsNameOneMatrixAcrossStories(t *testing.T) {
	f := newFlags()
	if err := f.set.Parse([]string{"-pairs", "paused-holder/zk,killed-holder/mysql-row,paused-holder/zk,all/redis-py,fencing/all"}); err != nil {
		t.Fatal(err)
	}
	got, err := planPairs(f, only{})
	if err != nil {
		t.Fatal(err)
	}
	py, _ := plan("all", "redis-py", only{}, nil)
	fencing, _ := plan("fencing", "", only{}, nil)
	want := [][2]string{{"paused-holder", "zk"}, {"killed-holder", "mysql-row"}}
	want = append(want, py...)
	for _, p := range fencing {
		if !slices.Contains(want, p) {
			want = append(want, p)
		}
	}
	if len(py) < 2 || len(fencing) < 2 || !slices.Equal(got, want) {
		t.Fatalf("-pairs planned %v, want %v", got, want)
	}
	for _, p := range py {
		if p[1] != "redis-py" {
			t.Fatalf("all/redis-py planned %v", p)
		}
	}
	f = newFlags()
	if err := f.set.Parse([]string{"-pairs", "paused-holder/zk,paused-holder/laravel"}); err != nil {
		t.Fatal(err)
	}
	kept, err := planPairs(f, only{kinds: []string{"zookeeper"}})
	if want := [][2]string{{"paused-holder", "zk"}}; err != nil || !slices.Equal(kept, want) {
		t.Fatalf("-pairs with -service zookeeper planned %v (%v), want %v", kept, err, want)
	}
	if _, err := planPairs(f, only{kinds: []string{"etcd"}}); err == nil {
		t.Fatal("-pairs with a -service none of its pairs runs on planned something")
	}
}

// -language keeps the locks whose clients are written in it, this
// repository's own counting as Go, and refuses a language no lock has.
func TestLanguageKeepsOnlyItsLocks(t *testing.T) {
	pairs, err := plan("all", "", only{kinds: []string{"redis"}, languages: []string{"go"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range pairs {
		info, _ := locks.Lookup(p[1])
		if info.Language != "" && info.Language != "Go" {
			t.Fatalf("pair %s/%s: its clients are %s", p[0], p[1], info.Language)
		}
		seen[p[1]] = true
	}
	for _, want := range []string{"set-nx-px", "redsync"} {
		if !seen[want] {
			t.Fatalf("no pair of %s in %v", want, pairs)
		}
	}
	if _, err := plan("all", "", only{languages: []string{"COBOL"}}, nil); err == nil || !strings.Contains(err.Error(), "-language COBOL") {
		t.Fatalf("a language no lock has: %v", err)
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
		if b, err := os.ReadFile(filepath.Join(dir, seatFile)); err != nil || !bytes.Contains(b, []byte("baseline ")) {
			t.Fatalf("shard %s: %s: %v\n%s", shard, seatFile, err, b)
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
	checkJudgesStoredRunsAgain(t, merged, m.Entries[0].Dir)
}

// checkJudgesStoredRunsAgain runs -check over a merged matrix: judged
// again, every run keeps its verdict; a run whose stored verdict is not
// what today's checkers say of its history (as after a checker fix) gets
// today's, in its results.json and in the summary, and nothing starts.
func checkJudgesStoredRunsAgain(t *testing.T, root, stale string) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-check", root}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "judged 3 stored run(s) again: 0 changed verdict") {
		t.Fatalf("-check of a fresh matrix: exit %d:\n%s%s", code, out.String(), errb.String())
	}
	// What an older checker said of the run: a double holder it saw in a
	// fault-free history, and so no match.
	path := filepath.Join(stale, "results.json")
	var res map[string]any
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &res)
	}
	if err != nil {
		t.Fatal(err)
	}
	res["outcome"], res["matched"], res["observations"] = "unsafe", false, []string{"double-holder"}
	if b, err = json.Marshal(res); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run(context.Background(), []string{"-check", root}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "was unsafe (did not match), now safe (matched)") ||
		!strings.Contains(out.String(), "1 changed verdict") {
		t.Fatalf("-check of a stale verdict: exit %d:\n%s%s", code, out.String(), errb.String())
	}
	var m struct{ Matched, Total int }
	if b, err = os.ReadFile(filepath.Join(root, "summary.json")); err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil || m.Matched != 3 || m.Total != 3 {
		t.Fatalf("summary after -check: %d of %d matched (%v)", m.Matched, m.Total, err)
	}
	// One run's directory is judged alone; a directory with no run is bad
	// input.
	out.Reset()
	if code := run(context.Background(), []string{"-check", stale}, &out, &errb); code != 0 || !strings.Contains(out.String(), "judged 1 stored run(s)") {
		t.Fatalf("-check of one run: exit %d:\n%s", code, out.String())
	}
	errb.Reset()
	if code := run(context.Background(), []string{"-check", t.TempDir()}, &out, &errb); code != 2 || strings.Count(errb.String(), "\n") != 1 {
		t.Fatalf("-check of an empty dir: exit %d, %q", code, errb.String())
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
	register()
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

// labelledAfterDeath is what the run of pid, killed, left labelled: read
// once its process is a zombie (dead to its own work, alive to kill(2)),
// so nothing it was still doing adds to or takes from the list.
func labelledAfterDeath(t *testing.T, pool *dockertest.Pool, pid int) []string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if procstat.State(pid) == "Z" {
			return labelled(t, pool, docker.LabelPID, strconv.Itoa(pid))
		}
	}
	t.Fatalf("process %d did not die within 10 s of SIGKILL", pid)
	return nil
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
	// The run may first wait for the machine room's seats, which a matrix
	// beside it holds (a PostgreSQL library pair takes the machine alone
	// for many seconds): this bounds a hang, it times nothing.
	deadline := time.Now().Add(3 * time.Minute)
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
	// The run may first wait for the machine room's seats, which a matrix
	// beside it holds (a PostgreSQL library pair takes the machine alone
	// for many seconds): this bounds a hang, it times nothing.
	deadline := time.Now().Add(3 * time.Minute)
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
// run removes them, saying so. Every docker run on the machine sweeps a
// dead run's leftovers as it starts, and in make test the docker
// package's runs start beside this one: so the killed run stays a zombie,
// alive to their sweeps, until just before the next run starts, and a
// next run that finds the leftovers already gone must leave none.
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
		if sig == os.Interrupt {
			_ = cmd.Wait()
			if left := labelled(t, pool, docker.LabelPID, pid); len(left) > 0 {
				t.Fatalf("after SIGINT the run left %v", left)
			}
			continue
		}
		if left := labelledAfterDeath(t, pool, cmd.Process.Pid); len(left) == 0 {
			t.Fatal("want the killed run's containers left behind for the next run to find")
		}
		_ = cmd.Wait()
		next := exec.Command(bin, "-backend", "docker", "-scenario", "baseline", "-lock", "mutex", "-time-limit", "1s", "-out", t.TempDir())
		out, err := next.CombinedOutput()
		if err != nil {
			t.Fatalf("next run: %v\n%s", err, out)
		}
		if left := labelled(t, pool, docker.LabelPID, pid); len(left) > 0 {
			t.Fatalf("after the next run, still there: %v\n%s", left, out)
		}
		if !strings.Contains(string(out), "removed a dead run's leftovers: run "+pid+"-") {
			t.Logf("the next run found the killed run's leftovers removed already, by another docker run on this machine:\n%s", out)
		}
	}
}

func TestPairLineSaysPlaceVerdictTimeAndTimeLeft(t *testing.T) {
	cases := []struct {
		place, name, verdict string
		took, waited, fault  time.Duration
		left                 time.Duration
		want                 string
	}{
		{place(37, 132, false), "paused-holder / redsync", "MATCHED", 3500 * time.Millisecond, 0, 0, 2 * time.Minute,
			"[ 37/132] paused-holder / redsync     MATCHED  3.5 s  ~2 min left"},
		{place(5, 132, false), "baseline / none", "NOT MATCHED  safe (expected unsafe +lost-update)", 2049 * time.Millisecond, 4200 * time.Millisecond, 0, 41 * time.Second,
			"[  5/132] baseline / none             NOT MATCHED  safe (expected unsafe +lost-update)  2.0 s (waited 4.2 s for seats)  ~40 s left"},
		{place(6, 132, false), "lost-reply / set-nx-px", "MATCHED", 4100 * time.Millisecond, 0, 420 * time.Millisecond, 41 * time.Second,
			"[  6/132] lost-reply / set-nx-px      MATCHED  4.1 s (its fault waited 0.42 s for traffic)  ~40 s left"},
		// The last pair has nothing left to say about.
		{place(2, 2, true), "fair-order / fair", "MATCHED", time.Second, 0, 0, 0,
			"[again 2/2] fair-order / fair           MATCHED  1.0 s"},
	}
	for _, c := range cases {
		if got := pairLine(c.place, c.name, 26, c.verdict, c.took, c.waited, c.fault, c.left); got != c.want {
			t.Errorf("pairLine:\n got %q\nwant %q", got, c.want)
		}
	}
	for d, want := range map[time.Duration]string{0: "", time.Second: "~5 s", 61 * time.Second: "~60 s", 63 * time.Second: "~65 s",
		89 * time.Second: "~90 s", 90 * time.Second: "~2 min", 150 * time.Second: "~3 min", 269 * time.Second: "~4 min"} {
		if got := roughly(d); got != want {
			t.Errorf("roughly(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestVerdictSaysWhatDidNotMatch(t *testing.T) {
	exp := verdict.Expectation{Outcome: verdict.Unsafe, Show: []string{"lost-update"}, Hide: []string{"promise-broken"}}
	cases := []struct {
		res  *engine.Result
		err  error
		want string
	}{
		{&engine.Result{Expected: exp, Judgement: verdict.Judgement{Outcome: verdict.Unsafe, Matched: true}}, nil, "MATCHED"},
		{&engine.Result{Expected: exp, Judgement: verdict.Judgement{Outcome: verdict.Safe}}, nil, "NOT MATCHED  safe (expected unsafe +lost-update −promise-broken)"},
		{&engine.Result{Expected: exp, Judgement: verdict.Judgement{Outcome: verdict.Unsafe, Observations: []string{"promise-broken"}}}, nil,
			"NOT MATCHED  unsafe without lost-update with promise-broken (expected unsafe +lost-update −promise-broken)"},
		{&engine.Result{Expected: exp, Judgement: verdict.Judgement{Outcome: verdict.Vacuous, Vacuous: "required fault never happened: pause"}}, nil,
			"NOT MATCHED  vacuous: required fault never happened: pause"},
		{&engine.Result{Expected: exp, Judgement: verdict.Judgement{Outcome: verdict.Starved, Starved: "the harness's timers ran 130ms late at 1.204s; a node's reply came 70ms late at 2.000s (limits: timers 100ms, replies 50ms, a pause's overrun 50ms, a restart 250ms)"}}, nil,
			"STARVED  harness's timers ran 130ms late at 1.204s (+more)"},
		{&engine.Result{Expected: exp, Judgement: verdict.Judgement{Outcome: verdict.Safe, Matched: true, Late: "a node's reply came 60ms late at 0.500s (limits: x)"}}, nil,
			"MATCHED  late: a node's reply came 60ms late at 0.500s"},
		{nil, errors.New("redis-server not found\nmore"), "ERROR  redis-server not found"},
		{&engine.Result{Judgement: verdict.Judgement{Outcome: verdict.LockUnsafe, Matched: true, Finding: "double-holder under pause"}}, nil,
			"MATCHED  finding: double-holder under pause"},
	}
	for _, c := range cases {
		if got := verdictOf(c.res, c.err); got != c.want {
			t.Errorf("verdictOf:\n got %q\nwant %q", got, c.want)
		}
	}
}

// The time left is the pairs' own time, laid out as the runner and the
// room start them.
func TestTimeLeftRunsPairsSideBySideAndAloneOnesByThemselves(t *testing.T) {
	s := time.Second
	cases := map[string]struct {
		jobs            []job
		parallel, seats int
		want            time.Duration
	}{
		"nothing":               {nil, 2, 2, 0},
		"two at a time":         {[]job{{4 * s, 1, false}, {4 * s, 1, false}, {4 * s, 1, false}, {4 * s, 1, false}}, 2, 2, 8 * s},
		"one at a time":         {[]job{{4 * s, 1, false}, {4 * s, 1, false}, {4 * s, 1, false}}, 1, 2, 12 * s},
		"more slots than seats": {[]job{{4 * s, 1, false}, {4 * s, 1, false}, {4 * s, 1, false}, {4 * s, 1, false}}, 4, 2, 8 * s},
		// One holds its seat for 1 s more; the next starts at once, the
		// third when the first ends.
		"running first": {[]job{{1 * s, 1, true}, {2 * s, 1, false}, {2 * s, 1, false}}, 2, 2, 3 * s},
		// An alone story waits for the machine, and the pair after it
		// waits behind it, though a seat is free while it waits.
		"alone in the middle": {[]job{{3 * s, 1, false}, {4 * s, 2, false}, {3 * s, 1, false}}, 2, 2, 10 * s},
		"alone holding":       {[]job{{2 * s, 2, true}, {3 * s, 1, false}, {3 * s, 1, false}}, 2, 2, 5 * s},
		// Each pair takes the first slot that frees.
		"slots free": {[]job{{3 * s, 1, true}, {1 * s, 1, true}, {2 * s, 1, false}, {1 * s, 1, false}}, 2, 2, 4 * s},
		// An alone story on a room of one seat is just one more pair.
		"one seat": {[]job{{2 * s, 4, false}, {2 * s, 1, false}}, 2, 1, 4 * s},
	}
	for name, c := range cases {
		if got := timeLeft(c.jobs, c.parallel, c.seats); got != c.want {
			t.Errorf("%s: timeLeft = %s, want %s", name, got, c.want)
		}
	}
	// Each job starts when its slot and seats are free, in order.
	starts, _ := schedule([]job{{3 * s, 1, false}, {4 * s, 2, false}, {3 * s, 1, false}}, 2, 2)
	if want := []time.Duration{0, 3 * s, 7 * s}; !slices.Equal(starts, want) {
		t.Errorf("schedule starts %v, want %v", starts, want)
	}
	// What other processes make a pair wait is learned with a first
	// guess of none counted as one pair.
	if got := extraWait([]time.Duration{2 * s, 4 * s}); got != 2*s {
		t.Errorf("extraWait = %s, want 2s", got)
	}
	// The overhead learned: the prior counts as one run, then the lock's
	// own runs weigh against that mean.
	prior := overhead{time.Second, time.Second}
	got := expectOverhead(prior, []overhead{{3 * s, s}, {2 * s, s}}, []overhead{{3 * s, s}})
	if want := (overhead{2500 * time.Millisecond, s}); got != want {
		t.Errorf("expectOverhead = %v, want %v", got, want)
	}
	if got := expectOverhead(prior, nil, nil); got != prior {
		t.Errorf("with nothing seen, expectOverhead = %v, want the prior", got)
	}
}

// A pair's expected overhead is learned from the pairs of its own server
// kind: ZooKeeper's, which a matrix begins with and whose JVMs start in
// seconds, do not make the Redis pairs after them look slow.
func TestTheEstimateLearnsByServerKind(t *testing.T) {
	s := time.Second
	plan := []pairPlan{{scenario: "baseline", lock: "zk", kind: "zookeeper", limit: 3 * s, take: 2},
		{scenario: "baseline", lock: "curator", kind: "zookeeper", limit: 3 * s, take: 2},
		{scenario: "baseline", lock: "set-nx-px", kind: "redis", limit: 2 * s}}
	var out, errb bytes.Buffer
	tr := newTracker(&out, &errb, plan, 2, 4, false, false)
	now := time.Unix(1000, 0)
	tr.mu.Lock()
	tr.now = func() time.Time { return now }
	tr.begun = now
	tr.mu.Unlock()
	tr.begin(0)
	now = now.Add(5 * s) // its ensemble serves
	tr.progress(0)(engine.Progress{TimeLimit: 3 * s})
	now = now.Add(4 * s)
	tr.finish(0, &engine.Result{Started: time.Unix(1000, 0), Judgement: verdict.Judgement{Matched: true}}, nil, nil, now)
	tr.stop()
	if got := tr.expected(plan[2]); got != priorOverhead {
		t.Errorf("a Redis pair after a ZooKeeper pair: expected overhead %v, want the prior %v", got, priorOverhead)
	}
	if got := tr.expected(plan[1]); got.startup <= priorOverhead.startup {
		t.Errorf("a ZooKeeper pair after one that took 5 s to start: expected start-up %s, want more than the prior's", got.startup)
	}
}

// trackTwo is a tracker of two pairs on a clock the test moves, with the
// first pair ended as res.
func trackTwo(t *testing.T, live, verbose bool, res *engine.Result) (string, *tracker) {
	t.Helper()
	var out, errb bytes.Buffer
	plan := []pairPlan{{scenario: "paused-holder", lock: "redsync", limit: 3500 * time.Millisecond},
		{scenario: "fair-order", lock: "fair", limit: 4500 * time.Millisecond, alone: true}}
	var now time.Time
	tr := newTracker(&out, &errb, plan, 2, 2, live, verbose)
	tr.mu.Lock()
	now = time.Unix(1000, 0)
	tr.now = func() time.Time { return now }
	tr.begun = now
	tr.mu.Unlock()
	// The status line's goroutine reads the clock under the tracker's lock.
	step := func(d time.Duration) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		now = now.Add(d)
	}
	tr.begin(0)
	step(600 * time.Millisecond)
	tr.progress(0)(engine.Progress{Elapsed: 100 * time.Millisecond, TimeLimit: 3500 * time.Millisecond, Ops: 12})
	tr.mu.Lock()
	tr.drawLocked()
	tr.mu.Unlock()
	step(4 * time.Second)
	res.Started = time.Unix(1000, 0).Add(100 * time.Millisecond)
	tr.finish(0, res, nil, []byte("paused-holder/redsync: 1 lock node(s) + store up\n"), time.Unix(1004, 600_000_000))
	tr.stop()
	return out.String(), tr
}

func TestPairPrintsItsBlockOnlyWhenNotMatchedOrVerbose(t *testing.T) {
	exp := verdict.Expectation{Outcome: verdict.Unsafe, Show: []string{"lost-update"}}
	matched := func() *engine.Result {
		return &engine.Result{Scenario: "paused-holder", Lock: "redsync", Expected: exp, Dir: "results/x", Judgement: verdict.Judgement{Outcome: verdict.Unsafe, Observations: []string{"lost-update"}, Matched: true}}
	}
	out, tr := trackTwo(t, false, false, matched())
	if strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "[1/2] paused-holder / redsync  MATCHED  4.5 s  ~") {
		t.Fatalf("a matched pair, not -v: want its one line, got %q", out)
	}
	if strings.Contains(out, "\r") {
		t.Fatalf("plain output drew a status line: %q", out)
	}
	// It held one seat from Started to the end of Run; the learned
	// start-up is from Started to its clients' ready.
	if u := tr.use[0]; u.seats != 1 || u.held != 4500*time.Millisecond || u.runs != 1 {
		t.Fatalf("seat use %+v, want 1 seat for 4.5 s in 1 run", u)
	}
	if tr.use[1].seats != 2 {
		t.Fatalf("an alone story holds every seat, got %d", tr.use[1].seats)
	}
	if seen := tr.seenByLock["redsync"]; len(seen) != 1 || seen[0].startup != 400*time.Millisecond {
		t.Fatalf("learned %+v, want a start-up of 400ms", seen)
	}
	// Nothing ran beside it, yet it waited 100ms for its seat: that is
	// learned as a wait other processes cause.
	if w := tr.waited[false]; len(w) != 1 || w[0] != 100*time.Millisecond {
		t.Fatalf("learned waits %v, want [100ms]", w)
	}
	out, _ = trackTwo(t, false, true, matched())
	if !strings.Contains(out, "lock node(s) + store up") || !strings.Contains(out, "→ results/x") {
		t.Fatalf("-v: want the matched pair's log and verdicts, got %q", out)
	}
	bad := matched()
	bad.Outcome, bad.Observations, bad.Matched = verdict.Safe, nil, false
	out, _ = trackTwo(t, false, false, bad)
	if !strings.Contains(out, "NOT MATCHED  safe (expected unsafe +lost-update)") || !strings.Contains(out, "lock node(s) + store up") ||
		!strings.Contains(out, "DID NOT MATCH") {
		t.Fatalf("a pair that did not match: want its line and block, got %q", out)
	}
	// On a terminal the status line is drawn, then cleared for the
	// pair's line, which starts at the line's beginning.
	out, _ = trackTwo(t, true, false, matched())
	if !strings.Contains(out, "\r\033[K[0/2] 0:01, ~") || !strings.Contains(out, "paused-holder/redsync 0.1/3.5 s 12 ops") ||
		!strings.Contains(out, "\r\033[K[1/2] paused-holder / redsync") {
		t.Fatalf("terminal: want a status line cleared before the pair's line, got %q", out)
	}
}

func TestSeatSecondsPerStoryMostFirst(t *testing.T) {
	s := time.Second
	plan := []pairPlan{{scenario: "baseline", lock: "a", limit: s, kind: "redis"}, {scenario: "baseline", lock: "b", limit: s, kind: "redis"},
		{scenario: "fair-order", lock: "fair", alone: true, limit: 3 * s, kind: "zookeeper"}, {scenario: "paused-holder", lock: "a", limit: 3 * s, kind: "redis"}}
	use := []seatUse{{seats: 1, held: 2 * s, runs: 1, start: s / 2, story: s, judge: s / 2, reports: s / 10},
		{seats: 1, held: 3 * s, runs: 2, start: s, story: 2 * s}, {seats: 2, held: 4 * s, runs: 1, start: s / 2, story: 3 * s, judge: s / 2},
		{seats: 1, held: 1 * s, runs: 1, story: s, own: s, early: true}} // ended 2 s before its time limit
	var b bytes.Buffer
	seatTable(&b, plan, use, 2, 9*time.Second)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{
		"fair-order                         1     2       4.0          8.0",
		"baseline                           2     1       5.0          5.0",
		"paused-holder                      1     1       1.0          1.0",
		"total                              4            10.0         14.0",
		"14.0 seat-seconds fill 2 seats for at least 7 s; the matrix took 9 s; counted with 1 starved or vacuous first run(s) that ran again",
		// Story time: 1+1+1 s on one seat each (paused-holder's to its
		// early end, not its 3 s limit), 3 s on both: 9 seat-seconds over
		// 2 seats.
		"the bound no scheduler can beat: the pairs' own story time (their time limits, or to where a run ended once its story was over) over the 2 seats, 5 s; the matrix took 2.00 times it",
		"1 of 4 pairs ended once their story was over (-full-time keeps them to their time limits): 2.0 seat-seconds of time limits not spent",
		"where the seat-seconds went, by server kind (reports are written with no seat held: wall seconds):",
		"KIND         PAIRS SEAT-SECONDS     STORY  START-UP   JUDGING   REPORTS",
		"zookeeper        1          8.0       6.0       1.0       1.0       0.0",
		"redis            3          6.0       4.0       1.5       0.5       0.1",
		"total            4         14.0      10.0       2.5       1.5       0.1",
		"seats idle: 4.0 of the 18.0 seat-seconds the matrix's wall time offered (waiting for an alone story's turn, the tail)",
	}
	if len(lines) != 15 || !slices.Equal(lines[2:], want) {
		t.Fatalf("seat table:\n%s\nwant rows:\n%s", b.String(), strings.Join(want, "\n"))
	}
	// The file a README cites holds the table and every pair's line.
	dir := t.TempDir()
	if err := writeSeats(dir, plan, use, 2, 9*time.Second, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	f, err := os.ReadFile(filepath.Join(dir, seatFile))
	if err != nil || !strings.Contains(string(f), want[0]) ||
		!strings.Contains(string(f), "baseline / b                                             1    2       3.0          3.0") {
		t.Fatalf("%s: %v\n%s", seatFile, err, f)
	}
}

// A matrix prints one line per matched pair; -v adds every pair's block.
// Output that is not a terminal never draws a status line.
func TestVerbosePrintsEveryBlock(t *testing.T) {
	args := []string{"-scenario", "baseline", "-lock", "set-nx-px,mutex", "-time-limit", "1s"}
	for _, verbose := range []bool{false, true} {
		a := append(slices.Clone(args), "-out", t.TempDir())
		if verbose {
			a = append(a, "-v")
		}
		var out bytes.Buffer
		if code := run(context.Background(), a, &out, &bytes.Buffer{}); code != 0 {
			t.Fatalf("-v %v: exit %d:\n%s", verbose, code, out.String())
		}
		s := out.String()
		if strings.Contains(s, "\r") {
			t.Fatalf("a status line was drawn on output that is not a terminal:\n%q", s)
		}
		lines := 0
		for _, l := range strings.Split(s, "\n") {
			if strings.HasPrefix(l, "[") && strings.Contains(l, "MATCHED") {
				lines++
			}
		}
		blocks := strings.Count(s, "lock node(s) + store up")
		if lines != 2 || verbose && blocks != 2 || !verbose && blocks != 0 {
			t.Fatalf("-v %v: %d pair lines and %d blocks, want 2 and %d:\n%s", verbose, lines, blocks, map[bool]int{true: 2}[verbose], s)
		}
		if !strings.Contains(s, "seat-seconds per story") || !strings.Contains(s, "2 of 2 runs matched") {
			t.Fatalf("-v %v: no seat-seconds table or count:\n%s", verbose, s)
		}
	}
}

// The status line tells a pair waiting for the machine from one starting.
func TestStatusLineSaysWhoWaitsForSeats(t *testing.T) {
	t.Setenv("COLUMNS", "200")
	plan := []pairPlan{{scenario: "paused-holder", lock: "redsync", limit: 3500 * time.Millisecond},
		{scenario: "fair-order", lock: "fair", limit: 4500 * time.Millisecond, alone: true}}
	tr := newTracker(io.Discard, io.Discard, plan, 2, 2, false, false)
	now := time.Unix(1000, 0)
	tr.now = func() time.Time { return now }
	tr.begun = now
	tr.begin(0)
	tr.progress(0)(engine.Progress{Elapsed: time.Second})
	tr.begin(1)
	tr.mu.Lock()
	got := tr.statusLocked(now)
	tr.mu.Unlock()
	// 2.5 s of the first pair's limit and 0.5 s wind-up, then the alone
	// one: 0.25 s to start, 4.5 s, 0.5 s.
	want := "[0/2] 0:00, ~10 s left · paused-holder/redsync 1.0/3.5 s · fair-order/fair waits for seats"
	if got != want {
		t.Fatalf("status line\n got %q\nwant %q", got, want)
	}
	// On a narrower terminal it is cut to fit: a wrapped line is not
	// redrawn in place.
	t.Setenv("COLUMNS", "40")
	tr.mu.Lock()
	got = tr.statusLocked(now)
	tr.mu.Unlock()
	if n := len([]rune(got)); n != 39 || !strings.HasSuffix(got, "…") {
		t.Fatalf("status line on 40 columns: %d runes, %q", n, got)
	}
}

// A shard's index comes from the flag, or from the engine that started
// the copy: a Kubernetes Indexed Job counts from 0, a CI's parallel job
// from 1 and says the count too.
func TestShardFromTheEnvironment(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	good := []struct {
		flag string
		env  func(string) string
		i, n int
	}{
		{"2/3", env(), 2, 3},
		{"auto/4", env("JOB_COMPLETION_INDEX", "0"), 1, 4},
		{"auto/4", env("JOB_COMPLETION_INDEX", "3", "CI_NODE_INDEX", "1"), 4, 4},
		{"auto", env("CI_NODE_INDEX", "2", "CI_NODE_TOTAL", "5"), 2, 5},
		{"auto/3", env("CI_NODE_INDEX", "3", "CI_NODE_TOTAL", "5"), 3, 3},
	}
	for _, c := range good {
		i, n, err := parseShard(c.flag, c.env)
		if err != nil || i != c.i || n != c.n {
			t.Errorf("-shard %s: %d/%d, %v; want %d/%d", c.flag, i, n, err, c.i, c.n)
		}
	}
	bad := []struct {
		flag string
		env  func(string) string
	}{
		{"auto/4", env()},
		{"auto", env("JOB_COMPLETION_INDEX", "1")},
		{"auto/4", env("JOB_COMPLETION_INDEX", "4")},
		{"auto/4", env("JOB_COMPLETION_INDEX", "one")},
		{"0/3", env()},
		{"3", env()},
	}
	for _, c := range bad {
		if i, n, err := parseShard(c.flag, c.env); err == nil {
			t.Errorf("-shard %s: %d/%d, want an error", c.flag, i, n)
		}
	}
	var errb bytes.Buffer
	t.Setenv("JOB_COMPLETION_INDEX", "")
	t.Setenv("CI_NODE_INDEX", "")
	if code := run(context.Background(), []string{"-shard", "auto/2", "-out", t.TempDir()}, &bytes.Buffer{}, &errb); code != 2 || strings.Count(errb.String(), "\n") != 1 {
		t.Fatalf("-shard auto with nothing in the environment: exit %d, %q", code, errb.String())
	}
}

// A sweep of K1's pause in two shards, merged: below the lease no double
// holder, past it one; the merged table and plot are written, and bad
// sweeps cost one line.
func TestSweepShardsMergeIntoOnePlot(t *testing.T) {
	base := []string{"-scenario", "paused-holder", "-lock", "set-nx-px", "-sweep", "pause=0.5..2.5:2", "-runs", "1"}
	var dirs []string
	for _, shard := range []string{"1/2", "2/2"} {
		dir := t.TempDir()
		var out, errb bytes.Buffer
		if code := run(context.Background(), append(base, "-shard", shard, "-out", dir), &out, &errb); code != 0 {
			t.Fatalf("shard %s: exit %d:\n%s%s", shard, code, out.String(), errb.String())
		}
		dirs = append(dirs, dir)
	}
	merged := t.TempDir()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-merge", strings.Join(dirs, ","), "-out", merged}, &out, &errb); code != 0 {
		t.Fatalf("merge: exit %d:\n%s%s", code, out.String(), errb.String())
	}
	for _, row := range []string{"| set-nx-px | 0.5 | 1 | 0/1 = 0.00", "| set-nx-px | 2.5 | 1 | 1/1 = 1.00"} {
		if !strings.Contains(out.String(), row) {
			t.Errorf("merged table lacks %q:\n%s", row, out.String())
		}
	}
	if files, _ := filepath.Glob(filepath.Join(merged, "sweeps", "paused-holder", "*", "sweep.png")); len(files) != 1 {
		t.Errorf("merged plot: %v", files)
	}
	// Its cells name the runs copied under the merged -out.
	files, _ := filepath.Glob(filepath.Join(merged, "sweeps", "paused-holder", "*", "sweep.json"))
	var sw struct {
		Cells map[string]struct{ Dirs []string }
	}
	if b, err := os.ReadFile(files[0]); err != nil || json.Unmarshal(b, &sw) != nil || len(sw.Cells) != 2 {
		t.Fatalf("merged sweep.json: %v, %d cells", err, len(sw.Cells))
	}
	for key, c := range sw.Cells {
		for _, d := range c.Dirs {
			if _, err := os.Stat(filepath.Join(d, "results.json")); err != nil || !strings.HasPrefix(d, merged) {
				t.Errorf("%s: run %q is not under the merged out: %v", key, d, err)
			}
		}
	}
	errb.Reset()
	if code := run(context.Background(), []string{"-merge", dirs[0] + "," + t.TempDir(), "-out", t.TempDir()}, &bytes.Buffer{}, &errb); code != 2 ||
		strings.Count(errb.String(), "\n") != 1 {
		t.Errorf("a sweep merged with a directory that holds none: exit %d, %q", code, errb.String())
	}
	for name, args := range map[string][]string{
		"no such parameter":                   {"-scenario", "paused-holder", "-lock", "set-nx-px", "-sweep", "jump=1..2"},
		"out of range":                        {"-scenario", "paused-holder", "-lock", "set-nx-px", "-sweep", "pause=1..40"},
		"an even node count inside the range": {"-scenario", "redlock-crash-restart", "-lock", "redlock", "-sweep", "nodes=3..9"},
		"ttl too short":                       {"-scenario", "paused-holder", "-lock", "set-nx-px", "-sweep", "ttl=50..1000"},
		"ttl scales a pause out of range":     {"-scenario", "paused-holder", "-lock", "set-nx-px", "-sweep", "ttl=200..1000"},
		"ttl below a lease service's":         {"-scenario", "paused-holder", "-lock", "zk", "-ttl", "1s", "-sweep", "ttl=700..2000"},
		"two stories":                         {"-scenario", "paused-holder,fencing", "-lock", "set-nx-px", "-sweep", "pause=1..2"},
		"no lock":                             {"-scenario", "paused-holder", "-sweep", "pause=1..2"},
		"bad range":                           {"-scenario", "paused-holder", "-lock", "set-nx-px", "-sweep", "pause=2..1"},
		"runs alone":                          {"-scenario", "paused-holder", "-lock", "set-nx-px", "-runs", "3"},
		"sweep and explore":                   {"-lock", "set-nx-px", "-sweep", "pause=1..2", "-explore"},
	} {
		errb.Reset()
		if code := run(context.Background(), append(args, "-out", t.TempDir()), &bytes.Buffer{}, &errb); code != 2 || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%s: exit %d, %q", name, code, errb.String())
		}
	}
}

// The scenario files the docs point to read as stories, each with an
// expectation for every lock it names: a finding's command must run.
func TestDocsScenarioFilesRead(t *testing.T) {
	files, _ := filepath.Glob("../../docs/scenarios/*.json")
	if len(files) == 0 {
		t.Fatal("no scenario file under docs/scenarios")
	}
	for _, f := range files {
		told, _, err := readStories([]string{f})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for name, s := range told {
			if len(s.Expect) == 0 {
				t.Fatalf("%s: story %s expects nothing of any lock", f, name)
			}
		}
	}
}

// The pairs that take two seats start first, then those that take one,
// the alone ones last, each in the plan's order: the drain an alone pair
// waits for is paid once. The pairs of a kept topology follow one
// another, from the place of the first, so each finds the servers the one
// before it left.
func TestRunOrderPutsTheWideFirstAndTheAloneLast(t *testing.T) {
	plans := []pairPlan{{lock: "a", alone: true}, {lock: "b"}, {lock: "c", alone: true}, {lock: "d"}, {lock: "e"}}
	if got := runOrder(plans); !slices.Equal(got, []int{1, 3, 4, 0, 2}) {
		t.Fatalf("order %v", got)
	}
	zk, pg := "zookeeper×3", "postgres×1"
	plans = []pairPlan{{lock: "r1"}, {lock: "z1", topology: zk}, {lock: "r2"}, {lock: "p1", topology: pg, alone: true}, {lock: "z2", topology: zk},
		{lock: "r3"}, {lock: "p2", topology: pg, alone: true}, {lock: "z3", topology: zk}, {lock: "a1", alone: true}}
	if got := runOrder(plans); !slices.Equal(got, []int{0, 1, 4, 7, 2, 5, 3, 6, 8}) {
		t.Fatalf("order %v, want r1 z1 z2 z3 r2 r3 p1 p2 a1", got)
	}
	// Pairs of two seats before those of one: a wider pair behind a
	// narrower holds a seat idle while it waits for the second.
	plans = []pairPlan{{lock: "r1", take: 1}, {lock: "z1", topology: zk, take: 2}, {lock: "r2", take: 1}, {lock: "l1", take: 2}, {lock: "a1", alone: true}, {lock: "z2", topology: zk, take: 2}}
	if got := runOrder(plans); !slices.Equal(got, []int{1, 5, 3, 0, 2, 4}) {
		t.Fatalf("order %v, want z1 z2 l1 r1 r2 a1", got)
	}
	// A topology's pairs are dealt story by story: the pairs of one story
	// do not crash their servers side by side.
	plans = []pairPlan{{scenario: "s", lock: "r1"}, {scenario: "crash", lock: "z1", topology: zk}, {scenario: "crash", lock: "z2", topology: zk},
		{scenario: "crash", lock: "z3", topology: zk}, {scenario: "pause", lock: "z1", topology: zk}, {scenario: "pause", lock: "z2", topology: zk},
		{scenario: "s", lock: "r2"}, {scenario: "join", lock: "z1", topology: zk}}
	if got := runOrder(plans); !slices.Equal(got, []int{0, 1, 4, 7, 2, 5, 3, 6}) {
		t.Fatalf("order %v, want r1 crash/z1 pause/z1 join/z1 crash/z2 pause/z2 crash/z3 r2", got)
	}
}

// A pair's seats follow what was measured of its kind and its clients:
// one seat for a Redis lock whose clients are goroutines and for any
// pair on a local memcached, two for a pair whose clients are worker
// processes of this harness (a Go lock on a service, -client-procs on
// Redis) or another language's on Redis, ZooKeeper, etcd or MariaDB, the
// whole machine for another language's library on PostgreSQL.
func TestSeatsFollowTheMeasuredLoad(t *testing.T) {
	all := engine.Seats()
	baseline, err := scenario.Lookup("baseline")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		lock  string
		procs bool
		want  int
	}{
		{"set-nx-px", false, 1}, {"set-nx-px", true, engine.PairSeats}, {"redis-py", false, engine.PairSeats},
		{"zk", false, engine.PairSeats}, {"etcd-fenced", false, engine.PairSeats}, {"pg-lease", false, engine.PairSeats},
		{"mysql-get-lock", false, engine.PairSeats}, {"memcached-add", false, 1}, {"memcached-add", true, 1},
		{"curator", false, engine.PairSeats}, {"kazoo", false, engine.PairSeats}, {"etcd3", false, engine.PairSeats},
		{"symfony-pdo-mysql", false, engine.PairSeats}, {"symfony-memcached", false, 1}, {"tooz-memcached", false, 1},
		{"tooz-postgres", false, all}, {"symfony-pdo-pg", false, all},
	} {
		// A lock the baseline leaves out (its server ends leases early) is
		// seated by a story that judges it.
		story := "baseline"
		if _, judged := baseline.Expect[tc.lock]; !judged {
			story = "paused-holder"
		}
		p, err := engine.Resolve(engine.Options{Scenario: story, Lock: tc.lock, ClientProcs: tc.procs})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Seats(); got != tc.want {
			t.Errorf("%s / %s (client processes %v): %d seats, want %d of %d", story, tc.lock, tc.procs, got, tc.want, all)
		}
	}
	if p, err := engine.Resolve(engine.Options{Scenario: "baseline", Lock: "memcached-add", Backend: "docker"}); err != nil || p.Seats() != engine.PairSeats {
		t.Errorf("baseline / memcached-add on docker: %d seats (%v), want %d: memcached was measured light on local servers", p.Seats(), err, engine.PairSeats)
	}
	if p, err := engine.Resolve(engine.Options{Scenario: "baseline", Lock: "zk", Alone: true}); err != nil || p.Seats() != all {
		t.Errorf("baseline / zk asked to run alone: %d seats (%v), want all %d", p.Seats(), err, all)
	}
	// A watchdog's renewals are the meter's to read in the harness, not in
	// a worker process: only a pair with workers takes the machine.
	for _, tc := range []struct {
		lock  string
		procs bool
		want  int
	}{{"reentrant", false, 1}, {"reentrant", true, all}, {"symfony-redis", false, all}} {
		if p, err := engine.Resolve(engine.Options{Scenario: "watchdog-stall", Lock: tc.lock, ClientProcs: tc.procs}); err != nil || p.Seats() != tc.want {
			t.Errorf("watchdog-stall / %s (client processes %v): %d seats (%v), want %d of %d", tc.lock, tc.procs, p.Seats(), err, tc.want, all)
		}
	}
}

// A starved pair's second run asks for the whole machine; its first, and
// every other pair, for the seats its story and lock need.
func TestAStarvedPairRunsAgainAlone(t *testing.T) {
	m := &matrixRun{pairs: [][2]string{{"baseline", "set-nx-px"}}}
	if m.options(0).Alone {
		t.Fatal("a first run must not ask for the whole machine")
	}
	m.again = true
	if o := m.options(0); !o.Alone || o.Scenario != "baseline" || o.Lock != "set-nx-px" {
		t.Fatalf("second run's options %+v: want baseline / set-nx-px alone", o)
	}
}
