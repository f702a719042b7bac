// Package worker runs a client of the harness as an OS process of its own,
// so that a pause is a real SIGSTOP (timers, watchdog and runtime stop with
// it) and a crash a real SIGKILL (nothing of the client survives), and so
// that a lock written in another language can be put under test.
//
// The harness and a worker talk over the worker's stdin and stdout, one
// JSON object per line: the worker protocol. The harness writes Requests;
// the worker writes Replies, each answering a request by its id, and
// Events, each telling the harness that the worker stands at a command
// boundary or a named point and waits for a "go". The history is the
// harness's: an op is invoked when its request is written and completes
// when its reply is read, and a worker that dies meanwhile leaves it
// unknown (info).
//
// A session:
//
//	→ {"id":1,"op":"hello","hello":{"lock":"set-nx-px","nodes":["127.0.0.1:40001"],"store":"127.0.0.1:40002","ttl_ns":500000000,"owner":"c0:0"}}
//	← {"id":1}
//	→ {"id":2,"op":"acquire","key":"lock","clock_ns":0}
//	← {"event":"send","seq":1,"cmds":[["set","lock","V4S...","nx","px","500"]]}
//	→ {"op":"go","seq":1}
//	← {"event":"reply","seq":1,"ok":[true]}
//	→ {"op":"go","seq":1}
//	← {"id":2,"lease":{"key":"lock","token":"V4S...","valid_until_ns":1763830000123456789}}
//	→ {"id":3,"op":"read","key":"register"}
//	← {"id":3,"value":41}
//	→ {"id":4,"op":"write","key":"register","value":42}
//	← {"id":4}
//	→ {"id":5,"op":"release","lease":{"key":"lock","token":"V4S..."}}
//	← {"id":5,"err":"not-held","msg":"lock not held by this lease"}
//
// Events are optional: a worker that sends none still meets every
// whole-client pause and crash (they are signals), only command traps
// cannot spring inside it. A worker that sends them must not let the
// command leave (or its reply reach the lock) before the "go"; for a
// command the harness kills it instead, the "go" never comes.
package worker

// Env is the environment variable that starts a program as a worker: its
// value is the name of the lock to serve.
const Env = "LOCKTORTURE_WORKER"

// Ops of a Request.
const (
	// OpHello is the first request: what to build (Hello). The reply is
	// empty, or an error if the lock cannot be built.
	OpHello = "hello"
	// OpAcquire takes Key; the reply carries the Lease.
	OpAcquire = "acquire"
	// OpRelease gives Lease up.
	OpRelease = "release"
	// OpRead reads the protected register Key; the reply carries Value.
	OpRead = "read"
	// OpWrite writes Value to the register Key, with Fence when it is not
	// zero (the store refuses a token not greater than the last).
	OpWrite = "write"
	// OpGo lets the worker go on from the event numbered Seq.
	OpGo = "go"
)

// Error kinds of a Reply, each the error a lock returns in Go.
const (
	// ErrNotAcquired: the lock was definitely not taken.
	ErrNotAcquired = "not-acquired"
	// ErrNotHeld: the release deleted nothing (lapsed, or someone else's).
	ErrNotHeld = "not-held"
	// ErrStale: the store refused the write's fencing token.
	ErrStale = "stale"
	// ErrUnknown: the outcome is unknown (a timeout, a lost connection).
	ErrUnknown = "unknown"
)

// Events a worker sends.
const (
	// EventSend: Cmds are about to be written (one, or a pipeline).
	EventSend = "send"
	// EventReply: the replies to the commands of event Seq arrived; OK
	// says, per command, whether it did what it asked (not an error, nil,
	// zero or false).
	EventReply = "reply"
	// EventPoint: the lock reached its named point Point.
	EventPoint = "point"
	// EventLost: the lock told the holder of Lease (by its token) that it
	// is lost (locks.Lease.Lost). Nothing waits for a "go".
	EventLost = "lost"
)

// Request is a line from the harness to a worker.
type Request struct {
	ID    int64  `json:"id,omitempty"`
	Op    string `json:"op"`
	Hello *Hello `json:"hello,omitempty"`
	Key   string `json:"key,omitempty"`
	Lease *Lease `json:"lease,omitempty"`
	Value int64  `json:"value,omitempty"`
	Fence int64  `json:"fence,omitempty"`
	// ClockNS is the client's clock offset from the machine's, in
	// nanoseconds, as the nemesis has skewed it: a lock that reads a wall
	// clock reads the machine's plus this.
	ClockNS int64 `json:"clock_ns,omitempty"`
	// Seq is the event a "go" answers.
	Seq int64 `json:"seq,omitempty"`
}

// Hello says what a worker is to build. Durations are nanoseconds; zero
// means the lock's default.
type Hello struct {
	// Lock is the lock's name.
	Lock string `json:"lock"`
	// Nodes are the addresses of the worker's own links to the lock nodes,
	// in node order; Store the address of its link to the protected store.
	Nodes []string `json:"nodes"`
	Store string   `json:"store"`
	// StoreTimeoutNS bounds one command to the store.
	StoreTimeoutNS int64 `json:"store_timeout_ns,omitempty"`
	TTLNS          int64 `json:"ttl_ns"`
	// WaitNS bounds how long an acquire keeps trying while the lock is
	// taken.
	WaitNS int64 `json:"wait_ns,omitempty"`
	// WaiterTimeoutNS is a queued lock's waiter timeout.
	WaiterTimeoutNS int64 `json:"waiter_timeout_ns,omitempty"`
	// NodeTimeoutNS, for a lock that bounds each node's reply
	// (locks.Info.NodeTimeout, RedLock's), is that bound; zero for the
	// others.
	NodeTimeoutNS int64 `json:"node_timeout_ns,omitempty"`
	// Owner names the client process (an owner id for locks that store one).
	Owner string `json:"owner"`
}

// Lease is a lease as it crosses the pipe.
type Lease struct {
	Key   string `json:"key"`
	Token string `json:"token"`
	Fence int64  `json:"fence,omitempty"`
	// ValidUntilNS is the lease's validity deadline on the client's clock,
	// in Unix nanoseconds (0: the lock gives none).
	ValidUntilNS int64 `json:"valid_until_ns,omitempty"`
	// TellsLoss says the lock will tell when the lease is lost: an
	// EventLost with its token follows if it is.
	TellsLoss bool `json:"tells_loss,omitempty"`
}

// Reply is a line from a worker to the harness: the answer to request ID,
// or, when Event is set, an event.
type Reply struct {
	ID    int64  `json:"id,omitempty"`
	Lease *Lease `json:"lease,omitempty"`
	Value int64  `json:"value,omitempty"`
	// Err is one of the error kinds; Msg says more, for people.
	Err string `json:"err,omitempty"`
	Msg string `json:"msg,omitempty"`

	Event string `json:"event,omitempty"`
	// Seq numbers the event; a reply event has its send event's number.
	Seq  int64      `json:"seq,omitempty"`
	Cmds [][]string `json:"cmds,omitempty"`
	// Apart marks a send event from a thread of the worker's other than
	// the one serving the current request (a library's heartbeat): its
	// commands are not the op's (nemesis.Gate.SendingApart).
	Apart bool   `json:"apart,omitempty"`
	OK    []bool `json:"ok,omitempty"`
	Point string `json:"point,omitempty"`
}
