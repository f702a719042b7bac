package history

import (
	"encoding/json"
	"strconv"
)

// Site is where a nemesis op acted, in fields a program reads: Target says
// the same for a person, and nothing parses it. Which fields are set
// depends on the op (package fault lists the ops): a node; a link between
// a peer and a node; every link, or every node; a client, or one of its
// processes standing at a named point or at a command boundary. A history
// recorded before sites has none: Value.Site is nil and Op.Site is empty.
type Site struct {
	// Node is the Redis node acted on (killed, paused, its clock moved,
	// promoted), or the node end of a link ("store" is the protected
	// store's node).
	Node string `json:"node,omitempty"`
	// Peer is the other end of a link to Node, by the name the link knows
	// it by: a client (c0), a replica's replication link, another server.
	// Empty on a link fault that names Node means every link of Node. On a
	// client clock skew it is the client whose clock moved.
	Peer string `json:"peer,omitempty"`
	// Direction is the one direction of the link acted on, "upstream"
	// (what Peer sends) or "downstream" (what Node sends); empty: both.
	Direction string `json:"direction,omitempty"`
	// Cut is a partition's grudge: for each peer, the nodes it can no
	// longer reach.
	Cut map[string][]string `json:"cut,omitempty"`
	// All says the op acted on every link or every node (a heal, a reset
	// of every clock): it ends whatever of its kind is still on.
	All bool `json:"all,omitempty"`
	// Client is the client acted on, by its number in the run.
	Client ID `json:"client,omitzero"`
	// Process is the client's process acted on, when the op caught one.
	Process ID `json:"process,omitzero"`
	// Point is the named point the process stood at (a workload's
	// "before-write", a lock's own point).
	Point string `json:"point,omitempty"`
	// Command is the command the process stood at, by its name as sent
	// (lower case: "set", "evalsha"): a command boundary, before the
	// command was written or, with Reply, after its reply arrived and
	// before the lock saw it.
	Command string `json:"command,omitempty"`
	// Reply says the process stood after the reply of Command.
	Reply bool `json:"reply,omitempty"`
	// In is the lock op the process was in (Acquire, Release); empty
	// between ops (a watchdog's renewal) or at a named point.
	In string `json:"in,omitempty"`
	// Waiting says the process was caught waiting inside In, at no
	// command or point: a waiter picked for how long it had waited.
	Waiting bool `json:"waiting,omitempty"`
}

// Site is where op acted: its value's site, or an empty one where op has
// none (a client op, or a history recorded before sites).
func (op Op) Site() Site {
	if op.Value == nil || op.Value.Site == nil {
		return Site{}
	}
	return *op.Value.Site
}

// ID is a client's or a process's number on a Site, or none. Its zero
// value is none, so a site about no client leaves the field out of the
// JSON, and client 0 is still told from no client at all.
type ID struct {
	n   int
	set bool
}

// IDOf is the ID of number n.
func IDOf(n int) ID { return ID{n: n, set: true} }

// Int is the number, and false for none.
func (i ID) Int() (int, bool) { return i.n, i.set }

// IsZero reports whether i is none: the JSON leaves it out (omitzero).
func (i ID) IsZero() bool { return !i.set }

// String is the number, or "none".
func (i ID) String() string {
	if !i.set {
		return "none"
	}
	return strconv.Itoa(i.n)
}

// MarshalJSON writes the number, or null for none.
func (i ID) MarshalJSON() ([]byte, error) {
	if !i.set {
		return []byte("null"), nil
	}
	return strconv.AppendInt(nil, int64(i.n), 10), nil
}

// UnmarshalJSON reads a number, or null as none.
func (i *ID) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*i = ID{}
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*i = IDOf(n)
	return nil
}
