package nemesis

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Renewal is the op kind, in a profile and a boundary, of the commands a
// client sends between its lock ops: a watchdog's renewals, which run on
// the lock's connections while its holder works.
const Renewal = "renewal"

// maxNth is the deepest place among commands of one name that a profile
// tells apart: the second is a retry's first command (a SET NX sent again)
// or a second node's; deeper ones repeat what those show.
const maxNth = 2

// Profile is what a run's clients sent, op kind by op kind (history.Acquire,
// history.Release, Renewal), learned from the gate's hooks: the commands a
// lock performs, known without any help from the lock.
type Profile map[string]*OpCommands

// OpCommands is what the ops of one kind sent.
type OpCommands struct {
	// Ops is how many ops of the kind sent a command (for Renewal: the
	// spans between two ops of a client that sent one).
	Ops int `json:"ops"`
	// Commands are the commands seen, by name and place ("SET NX#2", the
	// second SET NX of its op).
	Commands map[string]*CommandSeen `json:"commands"`
}

// CommandSeen is how often one command was seen in an op kind, and where.
type CommandSeen struct {
	// Ops is how many ops sent it.
	Ops int `json:"ops"`
	// Index is the sum of its index among its op's commands, over Ops:
	// what orders the commands as the lock sends them.
	Index int `json:"index"`
}

// setUp are the commands a client sends to set a new connection up, or to
// load a script, not the lock's own: they go through the hooks too.
var setUp = map[string]bool{"hello": true, "client": true, "auth": true, "select": true, "readonly": true, "script": true}

// scriptLoad says whether cmds[i] is part of a client loading a script
// the server did not know (NOSCRIPT), once per server, which a short run
// may never do again: go-redis's EVAL of a script whose EVALSHA the op
// sent before, or the EVALSHA a client sends again after its SCRIPT LOAD
// (redis-py's way; the SCRIPT LOAD itself is set-up).
func scriptLoad(cmds []sent, i int) bool {
	digestSent := func(before int, sha string) bool {
		return slices.ContainsFunc(cmds[:before], func(c sent) bool { return len(c.args) > 1 && c.args[0] == "evalsha" && c.args[1] == sha })
	}
	c := cmds[i]
	switch {
	case c.script != "":
		return digestSent(i, c.script)
	case c.args[0] == "evalsha" && len(c.args) > 1:
		for j := i - 1; j >= 0; j-- {
			switch {
			case len(cmds[j].args) > 1 && cmds[j].args[0] == "evalsha" && cmds[j].args[1] == c.args[1]:
				return false // not the first send after a load
			case cmds[j].args[0] == "script":
				return digestSent(j, c.args[1])
			}
		}
	}
	return false
}

// shape is a command as a profile and a trap name it: its name, the SET
// options that make it a lock's SET, or the script an EVALSHA runs (a
// watchdog's renewal and an acquire are told apart by their scripts).
func (s sent) shape() string {
	if len(s.args) == 0 {
		return ""
	}
	name := strings.ToUpper(s.args[0])
	switch s.args[0] {
	case "set":
		for _, a := range s.args[min(3, len(s.args)):] {
			if a == "nx" || a == "xx" {
				name += " " + strings.ToUpper(a)
			}
		}
	case "evalsha", "evalsha_ro":
		if len(s.args) > 1 {
			name += " " + s.args[1]
		}
	}
	return name
}

// note adds the commands one op (or span between ops) of kind sent.
func (p Profile) note(kind string, cmds []sent) {
	if len(cmds) == 0 || kind == "" {
		return
	}
	oc := p[kind]
	if oc == nil {
		oc = &OpCommands{Commands: map[string]*CommandSeen{}}
		p[kind] = oc
	}
	oc.Ops++
	nth := map[string]int{}
	for i, c := range cmds {
		if len(c.args) == 0 || setUp[c.args[0]] || scriptLoad(cmds, i) {
			continue
		}
		sh := c.shape()
		if nth[sh]++; nth[sh] > maxNth {
			continue
		}
		key := sh + "#" + strconv.Itoa(nth[sh])
		seen := oc.Commands[key]
		if seen == nil {
			seen = &CommandSeen{}
			oc.Commands[key] = seen
		}
		seen.Ops++
		seen.Index += i
	}
}

// Profile is a copy of what the gate learned so far of the commands its
// clients' ops sent.
func (g *Gate) Profile() Profile {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := Profile{}
	for kind, oc := range g.profile {
		c := &OpCommands{Ops: oc.Ops, Commands: map[string]*CommandSeen{}}
		for k, v := range oc.Commands {
			seen := *v
			c.Commands[k] = &seen
		}
		out[kind] = c
	}
	return out
}

// Boundary is one place a lock's client can be caught in the commands of
// one kind of op: before its Nth command of one shape is sent, or after
// its reply came back and before the lock sees it.
type Boundary struct {
	// In is the op kind: history.Acquire, history.Release or Renewal.
	In string `json:"in"`
	// Command is the command's shape ("SET NX", "DEL", "EVALSHA <sha1>").
	Command string `json:"command"`
	// Nth is its place among the op's commands of that shape (1-based).
	Nth int `json:"nth"`
	// Reply: after the reply; otherwise before the command is sent.
	Reply bool `json:"reply"`
}

// Trap is the command trap standing at b. A renewal runs beside its
// holder's ops as well as between them, so its boundary is its command's
// first send whatever op is running, told apart by its shape.
func (b Boundary) Trap() *Command {
	c := &Command{In: b.In, Match: b.Command, Nth: b.Nth, Reply: b.Reply}
	if b.In == Renewal {
		c.In, c.Nth = "", 0
	}
	return c
}

// String is the boundary as -probe takes it and a report names it:
// "release before DEL#1", "acquire after SET NX#2".
func (b Boundary) String() string {
	side := "before"
	if b.Reply {
		side = "after"
	}
	return fmt.Sprintf("%s %s %s#%d", b.In, side, b.Command, b.Nth)
}

// ParseBoundary reads a boundary as String writes it.
func ParseBoundary(s string) (Boundary, error) {
	bad := func(why string) (Boundary, error) {
		return Boundary{}, fmt.Errorf("boundary %q: %s (want OP before|after COMMAND#N, e.g. \"release before DEL#1\")", s, why)
	}
	f := strings.Fields(s)
	if len(f) < 3 {
		return bad("too few words")
	}
	b := Boundary{In: f[0]}
	switch f[0] {
	case "acquire", "release", Renewal:
	default:
		return bad("the op is acquire, release or renewal")
	}
	switch f[1] {
	case "before":
	case "after":
		b.Reply = true
	default:
		return bad("the side is before or after")
	}
	rest := strings.Join(f[2:], " ")
	cmd, n, ok := strings.Cut(rest, "#")
	nth, err := strconv.Atoi(n)
	if !ok || err != nil || nth < 1 || nth > maxNth || strings.TrimSpace(cmd) == "" {
		return bad(fmt.Sprintf("the command ends in #N with 1 ≤ N ≤ %d", maxNth))
	}
	b.Command, b.Nth = strings.ToUpper(strings.TrimSpace(cmd)), nth
	if name, sha, ok := strings.Cut(b.Command, " "); ok && strings.HasPrefix(name, "EVALSHA") {
		// A script's digest is named as the client sent it.
		b.Command = name + " " + strings.ToLower(sha)
	}
	return b, nil
}

// Commands lists the commands of op kind kind that at least share of its
// ops sent (a renewal's: any seen twice), in the order the lock sends
// them: the commands of its usual path and its retries, without the rare
// ones that a short run may never pass again.
func (p Profile) Commands(kind string, share float64) []Boundary {
	oc := p[kind]
	if oc == nil || oc.Ops == 0 {
		return nil
	}
	type cmd struct {
		b   Boundary
		pos float64
	}
	var cmds []cmd
	for key, seen := range oc.Commands {
		if kind == Renewal && seen.Ops < 2 || kind != Renewal && float64(seen.Ops) < share*float64(oc.Ops) {
			continue
		}
		sh, n, _ := strings.Cut(key, "#")
		nth, _ := strconv.Atoi(n)
		if kind == Renewal && nth > 1 {
			continue
		}
		cmds = append(cmds, cmd{Boundary{In: kind, Command: sh, Nth: nth}, float64(seen.Index) / float64(seen.Ops)})
	}
	slices.SortFunc(cmds, func(a, b cmd) int {
		return cmp.Or(cmp.Compare(a.pos, b.pos), cmp.Compare(a.b.Nth, b.b.Nth), strings.Compare(a.b.Command, b.b.Command))
	})
	out := make([]Boundary, len(cmds))
	for i, c := range cmds {
		out[i] = c.b
	}
	return out
}
