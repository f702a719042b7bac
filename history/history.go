// Package history records what happened in a run as Jepsen-style ops and
// streams them to disk as they happen, so a run that dies midway keeps
// everything it had recorded.
package history

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/locktorture/locktorture/internal/spool"
)

// Type says whether an op is an invocation or how it completed.
type Type string

// The four op types. Every invoke has exactly one completion; Info means the
// outcome is unknown (timeout, lost connection): it may or may not have taken
// effect, and the process that saw it is retired.
const (
	Invoke Type = "invoke"
	OK     Type = "ok"
	Fail   Type = "fail"
	Info   Type = "info"
)

// NemesisProcess is the process id of the fault injector, so its actions sit
// in the same history as client ops.
const NemesisProcess = -1

// ObserverProcess is the process id of the harness's reader of what the
// lock nodes held (Observe ops): it is neither a client nor a fault, so
// checkers of clients' beliefs and of faults pass over it.
const ObserverProcess = -2

// Function names of the clients' ops, shared by workloads and checkers.
// The nemesis's ops are package fault's.
const (
	Acquire = "acquire"
	Release = "release"
	Read    = "read"
	Write   = "write"
	// Observe is what a lock node held of a key when the observer read it
	// straight from the node's own address: the owner in Value.Token (the
	// lease token stored in the value, or a hash lock's owner field; empty
	// when the key did not exist), Value.Deadline the harness time (ns)
	// by which the key expires at the earliest (0: no expiry), Value.Target
	// the node, Error set when the node did not answer, Value.Prior when
	// the read before it was sent, which still found what the node's
	// previous observation recorded. It is recorded when that changes, as
	// one OK op without an invocation.
	Observe = "observe"
	// Crash is a process's end where no op of it was in flight, an invoke
	// and an info, so that checkers see the process end.
	Crash = "crash"
)

// ErrEndRecorded marks an error whose process's end (Crash) is already in
// the history: whoever gets it retires the process and records nothing
// more of it. The gate records a kill so before it takes effect, where
// the process's own code, recording it after, could come after what the
// kill let another process do.
var ErrEndRecorded = errors.New("its end recorded")

// Value carries what an op was about. Fields are optional; which ones are set
// depends on F.
type Value struct {
	// Token is the lease token a lock handed out.
	Token string `json:"token,omitempty"`
	// Fence is the fencing token of a lease or of a write (0: none).
	Fence int64 `json:"fence,omitempty"`
	// Deadline is the harness time (ns) until which the lock promised the
	// lease, where the algorithm computes one (0: none).
	Deadline int64 `json:"deadline,omitempty"`
	// Reg is the register value read or written on the protected resource.
	Reg *int64 `json:"reg,omitempty"`
	// Target names what a nemesis op acted on (a process, a node, a
	// point), in words for a person; Site says the same for a program.
	Target string `json:"target,omitempty"`
	// Site is where a nemesis op acted, field by field (nil on client ops
	// and in histories recorded before sites).
	Site *Site `json:"site,omitempty"`
	// Duration is how long a nemesis action lasts, in ns.
	Duration int64 `json:"duration,omitempty"`
	// Usual is how long the action itself takes on an idle machine, in
	// ns, where that is the server's own work and not the harness's (an
	// ensemble member rejoining its quorum): lateness is counted past it.
	Usual int64 `json:"usual,omitempty"`
	// Prior is, on an observation, the harness time (ns) at which the
	// node's previous read was sent (0: none, or a history recorded
	// before it). Observations are recorded only when what a node holds
	// changes, so without it a checker knows the old state only from the
	// read that first found it: whatever removed it may have come at any
	// time since, and a change of owner could not be told apart from any
	// release made while the old owner held.
	Prior int64 `json:"prior,omitempty"`
}

// Op is one history entry.
type Op struct {
	Index   int64  `json:"index"`
	Process int    `json:"process"`
	Type    Type   `json:"type"`
	F       string `json:"f"`
	Key     string `json:"key,omitempty"`
	Value   *Value `json:"value,omitempty"`
	// Time is nanoseconds on the harness's monotonic clock since run start.
	Time int64 `json:"time"`
	// Error says why an op failed or why its outcome is unknown.
	Error string `json:"error,omitempty"`
}

// Int64 returns a pointer to v, for Value.Reg.
func Int64(v int64) *int64 { return &v }

// Recorder hands out op indexes and timestamps, keeps the history in memory
// for the checkers and appends every op to a JSONL file as it happens,
// through a spool (package spool): a client never waits on the disk.
type Recorder struct {
	mu    sync.Mutex
	start time.Time
	ops   []Op
	// n is how many ops were recorded, kept or not; forget stops keeping
	// them (Forget).
	n      int
	forget bool
	// attempts counts acquires answered, ok or fail (Attempts).
	attempts int
	// writes counts writes answered ok, and lastWrite is when the latest
	// was (Writes).
	writes    int
	lastWrite int64
	// deadlines is, by process, the deadline of the acquire by which it
	// holds a key now (Deadline).
	deadlines map[int]int64
	// grants is, by key tried, when an acquire of it last succeeded (0:
	// never yet) (Grants).
	grants  map[string]int64
	spool   *spool.Writer // nil: memory only
	file    *os.File
	nextPID int
	// nemesis is the latest completed nemesis action in words, kept as
	// ops are added so that Summary, polled while clients run, costs
	// nothing against them; nemesisAt is when it was recorded.
	nemesis   string
	nemesisAt int64
}

// NewRecorder starts the run clock. Ops are streamed to w (nil: memory only).
// firstFreeProcess is the first id NewProcess hands out, so initial clients
// can take 0..n-1.
func NewRecorder(w io.Writer, firstFreeProcess int) *Recorder {
	r := &Recorder{start: time.Now(), nextPID: firstFreeProcess, deadlines: map[int]int64{}, grants: map[string]int64{}}
	if w != nil {
		r.spool = spool.New(w)
	}
	return r
}

// Forget stops keeping ops in memory: they go to the file only, Ops
// returns what was kept before, and Summary and Deadline answer as
// before. A run too long to hold (an hour at 16 clients is 17M ops) is
// judged from its file as a stream (verdict.JudgeStream).
func (r *Recorder) Forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forget = true
}

// Create opens path for writing and returns a Recorder streaming to it.
func Create(path string, firstFreeProcess int) (*Recorder, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	r := NewRecorder(f, firstFreeProcess)
	r.file = f
	return r, nil
}

// Now is the harness time in ns since the run started.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// NewProcess returns a fresh process id, for a client whose previous process
// was retired after an unknown outcome.
func (r *Recorder) NewProcess() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.nextPID
	r.nextPID++
	return p
}

// Add stamps op with the next index and the current time, records it and
// queues it for the file: Close writes whatever is still queued, so a run
// that fails midway loses nothing it recorded.
func (r *Recorder) Add(op Op) Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.Index = int64(r.n)
	op.Time = r.Now()
	r.n++
	if !r.forget {
		r.ops = append(r.ops, op)
	}
	switch {
	case op.F == Release && op.Type == Invoke:
		r.deadlines[op.Process] = 0
	case op.F == Acquire && op.Type == Fail:
		r.attempts++
	case op.F == Write && op.Type == OK:
		r.writes++
		r.lastWrite = op.Time
	case op.F == Acquire && op.Type == Invoke:
		if _, ok := r.grants[op.Key]; !ok {
			r.grants[op.Key] = 0
		}
	case op.F == Acquire && op.Type == OK:
		r.grants[op.Key] = op.Time
		r.attempts++
		r.deadlines[op.Process] = 0
		if op.Value != nil {
			r.deadlines[op.Process] = op.Value.Deadline
		}
	}
	if op.Process == NemesisProcess && op.Type != Invoke {
		r.nemesisAt = op.Time
		r.nemesis = op.F
		if op.Value != nil && op.Value.Target != "" {
			r.nemesis += " " + op.Value.Target
		}
	}
	if r.spool != nil {
		// An Op always marshals: it holds strings, numbers and maps of them.
		line, _ := json.Marshal(op)
		_, _ = r.spool.Write(append(line, '\n'))
	}
	return op
}

// Invoke records the invocation of f by process and returns it; pass it to
// Complete when the outcome is known.
func (r *Recorder) Invoke(process int, f, key string, v *Value) Op {
	return r.Add(Op{Process: process, Type: Invoke, F: f, Key: key, Value: v})
}

// Complete records the completion of inv with type t.
func (r *Recorder) Complete(inv Op, t Type, v *Value, err error) Op {
	op := Op{Process: inv.Process, Type: t, F: inv.F, Key: inv.Key, Value: v}
	if err != nil {
		op.Error = err.Error()
	}
	return r.Add(op)
}

// End records process's end where no op of it is in flight (Crash: an
// invoke and an info, with err), the one way the workload and the gate
// both write it.
func (r *Recorder) End(process int, err error) {
	r.Complete(r.Invoke(process, Crash, "", nil), Info, nil, err)
}

// Summary is how many ops are recorded and the latest nemesis action in
// words, cheaply, for a progress line.
func (r *Recorder) Summary() (ops int, nemesis string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n, r.nemesis
}

// LastNemesis is when the nemesis's latest op was recorded (0: none yet),
// cheaply: a run that ends once its faults are over looks at it often.
func (r *Recorder) LastNemesis() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nemesisAt
}

// Grants is, for every key an acquire was tried on, when one last
// succeeded (harness ns; 0: none yet): a run ends early only while every
// key is being handed on.
func (r *Recorder) Grants() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.grants)
}

// Attempts is how many lock attempts were answered so far, ok or fail:
// the traffic a story's floor counts (verdict.Traffic), read while the
// clients run to hold its fault until they have made it.
func (r *Recorder) Attempts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attempts
}

// Writes is how many writes of the protected register were answered ok so
// far, and when the latest was: a pause that must outlast another
// client's write reads it.
func (r *Recorder) Writes() (n int, last int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes, r.lastWrite
}

// Deadline is the lease deadline of the acquire by which process holds a
// key now (harness ns): 0 where it holds none (it has released since its
// latest acquire) or the lock computes none. A trap reads it to end a
// pause inside the lease the process holds.
func (r *Recorder) Deadline(process int) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deadlines[process]
}

// Ops returns a copy of everything recorded so far.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// Close writes what is still queued, closes the file, if Create opened
// one, and reports the first write error, if any. Nothing recorded after
// it is written.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var err error
	if r.spool != nil {
		err = r.spool.Close()
	}
	if r.file != nil {
		if cerr := r.file.Close(); err == nil {
			err = cerr
		}
		r.file = nil
	}
	return err
}

// ErrTruncated reports that the last line of a history file was cut short,
// as happens when the harness is killed mid-write; the ops before it are
// returned with it.
var ErrTruncated = errors.New("history: last line truncated")

// Load reads a JSONL history. A torn final line yields the ops before it and
// ErrTruncated; a malformed line elsewhere is an error naming the line.
func Load(r io.Reader) ([]Op, error) {
	var ops []Op
	err := Each(r, func(op Op) { ops = append(ops, op) })
	var bad lineError
	if errors.As(err, &bad) {
		return nil, err
	}
	return ops, err
}

// lineError is a malformed line that is not the last.
type lineError struct {
	line int
	err  error
}

func (e lineError) Error() string { return fmt.Sprintf("history: line %d: %v", e.line, e.err) }
func (e lineError) Unwrap() error { return e.err }

// Each reads a JSONL history op by op and hands each to fn, in memory that
// does not grow with the history: a checker that reads it as a stream
// (checker.Stream) judges an hour's run in what a segment takes. Its
// errors are Load's; the ops before a malformed line have been handed
// over by the time it is reported.
func Each(r io.Reader, fn func(Op)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	var bad error
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		if bad != nil {
			return bad
		}
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			bad = lineError{line, err}
			continue
		}
		fn(op)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	if bad != nil {
		return ErrTruncated
	}
	return nil
}

// LoadFile is Load on a file path.
//
// A finished run's history is kept compressed (Compress): path may name
// the .gz file, or the plain one that was replaced by it.
func LoadFile(path string) ([]Op, error) {
	r, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return Load(r)
}

// Open opens a stored history for reading, as LoadFile finds it (plain or
// compressed), for Each.
func Open(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) && !strings.HasSuffix(path, ".gz") {
		if g, gerr := os.Open(path + ".gz"); gerr == nil {
			f, err, path = g, nil, path+".gz"
		}
	}
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if !strings.HasSuffix(path, ".gz") {
		return f, nil
	}
	gz, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("history: %s: %w", path, err)
	}
	return gzFile{gz, f}, nil
}

// gzFile closes the decompressor and the file under it.
type gzFile struct {
	*gzip.Reader
	f *os.File
}

func (g gzFile) Close() error { return errors.Join(g.Reader.Close(), g.f.Close()) }

// Compress replaces the finished history file at path with path.gz, about
// a tenth of its size: a matrix keeps every history whole without filling
// the disk. The plain file goes only once the compressed one is complete.
func Compress(path string) error {
	in, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // nothing on disk to compress (a history held in memory only)
	}
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	defer in.Close()
	out, err := os.Create(path + ".gz")
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	gz := gzip.NewWriter(out)
	_, err = io.Copy(gz, in)
	if cerr := gz.Close(); err == nil {
		err = cerr
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path + ".gz")
		return fmt.Errorf("history: compressing %s: %w", path, err)
	}
	return os.Remove(path)
}

// Pair is an invocation with its completion (nil while none was recorded).
type Pair struct {
	Invoke     Op
	Completion *Op
}

// Pairs matches each invoke with the next op of the same process, which is
// its completion because a process runs one op at a time. The nemesis is
// the exception: its actions overlap (a restart decided now and made after
// a delay, two clients' pauses), so its completion is matched with the
// earliest invocation in flight of the same action at the same site. A
// Completion points into ops, which nobody changes once recorded: a
// million-op history is paired without a copy of each completion.
func Pairs(ops []Op) []Pair {
	pairs := make([]Pair, 0, len(ops)/2+1)
	open := map[int]int{}
	nemesis := map[ActionKey][]int{}
	for j := range ops {
		op := &ops[j]
		if op.Process == NemesisProcess {
			k := ActionOf(*op)
			if op.Type == Invoke {
				nemesis[k] = append(nemesis[k], len(pairs))
				pairs = append(pairs, Pair{Invoke: *op})
			} else if q := nemesis[k]; len(q) > 0 {
				pairs[q[0]].Completion = op
				if nemesis[k] = q[1:]; len(q) == 1 {
					delete(nemesis, k)
				}
			}
			continue
		}
		if op.Type == Invoke {
			open[op.Process] = len(pairs)
			pairs = append(pairs, Pair{Invoke: *op})
			continue
		}
		if i, ok := open[op.Process]; ok {
			pairs[i].Completion = op
			delete(open, op.Process)
		}
	}
	return pairs
}

// ActionKey names a nemesis action for pairing its invocation with its
// completion: the fault, and where it acted (its site, which the nemesis
// never changes between the two, while it may reword the target to say
// what it did, as an eviction and a slot's hand-over do; the target in a
// history recorded before sites).
type ActionKey struct{ F, Where string }

// ActionOf is op's ActionKey.
func ActionOf(op Op) ActionKey {
	k := ActionKey{F: op.F}
	switch {
	case op.Value == nil:
	case op.Value.Site != nil:
		b, _ := json.Marshal(op.Value.Site)
		k.Where = string(b)
	default:
		k.Where = op.Value.Target
	}
	return k
}
