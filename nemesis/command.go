package nemesis

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Command selects a command boundary on a client's connections: where a
// trap springs without any call from the lock, so a library or a user's own
// lock meets the fault exactly as the built-in locks do. The fields are
// data, ANDed; a zero field matches anything.
type Command struct {
	// In is the lock op the client is in when the command is sent:
	// history.Acquire, history.Release, or "" for any (a watchdog's
	// renewal between ops included).
	In string `json:"in,omitempty"`
	// Match is one or more alternatives separated by "|", each a command
	// name followed by arguments it must carry, case-insensitive:
	// "SETNX|SET NX", "EVAL|EVALSHA", "DEL". Empty: any of the lock's own
	// commands, not one that sets a connection up or loads a script
	// (setUp): a client that dials inside a release says HELLO before the
	// release's command, and a trap on "the release's reply" means the
	// latter.
	Match string `json:"match,omitempty"`
	// After requires the command just before this one, in the same op and
	// on the same key, to match this (same syntax): "GET" with Match "DEL"
	// is the DEL of a compare-then-delete written as two commands.
	After string `json:"after,omitempty"`
	// Nth springs on the Nth command of the op that matches (1-based);
	// 0 springs on every match.
	Nth int `json:"nth,omitempty"`
	// LikeFirst springs only on a command like the op's first match: the
	// same script, by EVAL or EVALSHA, or else the same name. That is the
	// op's first try to take a key or a retry of it, not a later step of
	// a try that already took it (Symfony's lease set by a second script
	// after its first took the key).
	LikeFirst bool `json:"like_first,omitempty"`
	// Reply springs after the reply arrived and before the lock sees it
	// (the client reads its replies late, K6); otherwise before the command
	// is written (it leaves late, or never).
	Reply bool `json:"reply,omitempty"`
	// Succeeded springs only on a reply that is neither an error nor nil,
	// zero or false: the SETNX that took the key, not the one refused.
	Succeeded bool `json:"succeeded,omitempty"`
	// Every springs, at a reply, once Every or more matching commands sent
	// one after another (no other command of the op between them) have all
	// replied and succeeded, on the last of their replies to arrive: the
	// moment a RedLock client has heard OK from every node, whatever order
	// the replies came in and however many tries came before. Counting
	// sends instead (Nth) would spring on a try that lost some nodes.
	Every int `json:"every,omitempty"`
}

// String says where the trap stands, in the words the history records.
func (c Command) String() string {
	var b strings.Builder
	if c.Reply {
		b.WriteString("reply of ")
	}
	switch {
	case c.Every > 0:
		fmt.Fprintf(&b, "the last of %d or more successes in a row of ", c.Every)
	case c.Nth > 0:
		fmt.Fprintf(&b, "command #%d matching ", c.Nth)
	default:
		b.WriteString("any command matching ")
	}
	b.WriteString(orAny(c.Match))
	if c.After != "" {
		fmt.Fprintf(&b, " right after %s on the same key", c.After)
	}
	if c.LikeFirst {
		b.WriteString(" like the op's first")
	}
	if c.In != "" {
		fmt.Fprintf(&b, " in %s", c.In)
	}
	if c.Succeeded {
		b.WriteString(" that succeeded")
	}
	return b.String()
}

func orAny(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

// sent is one command a client sent during an op: its name and arguments
// in lower case, and the key it is about.
type sent struct {
	args []string
	key  string
	// replied and succeeded say what its reply was, once it arrived.
	replied, succeeded bool
	// script is an EVAL's script's SHA1, as an EVALSHA of it names it:
	// how the profile knows the EVAL that loads a script (scriptLoad).
	script string
	// apart marks a command a worker's other thread sent meanwhile
	// (Gate.SendingApart): not the op's own.
	apart bool
}

// splitApart parts an op's commands into its own and those another thread
// of its worker sent meanwhile (a heartbeat's: renewals). With none sent
// apart, as with every Go lock, ours is cmds itself: this runs at every
// op's end and every trap's look at a command.
func splitApart(cmds []sent) (ours, apart []sent) {
	if !slices.ContainsFunc(cmds, func(s sent) bool { return s.apart }) {
		return cmds, nil
	}
	for _, c := range cmds {
		if c.apart {
			apart = append(apart, c)
		} else {
			ours = append(ours, c)
		}
	}
	return ours, apart
}

// own is the op's own commands (splitApart) and where cmds[i], one of
// them, is among them: as a trap that names the op counts them.
func own(cmds []sent, i int) ([]sent, int) {
	ours, apart := splitApart(cmds)
	if apart == nil {
		return cmds, i
	}
	before := 0
	for _, s := range cmds[:i] {
		if s.apart {
			before++
		}
	}
	return ours, i - before
}

func newSent(raw []string) sent {
	if len(raw) > 0 && strings.Contains(raw[0], " ") && len(strings.Fields(raw[0])) > 0 {
		// redis-py names a command of two words in one argument ("SCRIPT
		// LOAD") and splits it when it writes it, as Redis reads it.
		raw = append(strings.Fields(raw[0]), raw[1:]...)
	}
	args := make([]string, len(raw))
	for i, a := range raw {
		args[i] = strings.ToLower(a)
	}
	s := sent{args: args, key: commandKey(args)}
	if len(args) > 1 && args[0] == "eval" {
		sum := sha1.Sum([]byte(raw[1]))
		s.script = hex.EncodeToString(sum[:])
	}
	return s
}

// commandKey is the first key a command names: the argument after the name,
// or after the script and the key count for EVAL, EVALSHA and FCALL.
func commandKey(args []string) string {
	if len(args) < 2 {
		return ""
	}
	switch args[0] {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		if len(args) > 3 && args[2] != "0" {
			return args[3]
		}
		return ""
	}
	return args[1]
}

// matches reports whether s fits spec ("SETNX|SET NX"): its name is the
// first word of an alternative and it carries every other word as an
// argument after the key. An empty spec fits any command but set-up.
func (s sent) matches(spec string) bool {
	if spec == "" {
		return len(s.args) > 0 && !setUp[s.args[0]]
	}
	for _, alt := range strings.Split(strings.ToLower(spec), "|") {
		words := strings.Fields(alt)
		if len(words) == 0 || len(s.args) == 0 || words[0] != s.args[0] {
			continue
		}
		ok := true
		for _, w := range words[1:] {
			found := false
			for _, a := range s.args[1:] {
				if a == w {
					found = true
					break
				}
			}
			ok = ok && found
		}
		if ok {
			return true
		}
	}
	return false
}

// selects reports whether the command at index i of an op's commands (all
// that were sent so far) is where c springs; op is the op the client is in.
func (c Command) selects(op string, cmds []sent, i int) bool {
	if c.In != "" {
		if c.In != op || cmds[i].apart {
			return false
		}
		cmds, i = own(cmds, i)
	}
	s := cmds[i]
	if !s.matches(c.Match) {
		return false
	}
	if c.After != "" {
		prev := -1
		for j := i - 1; j >= 0; j-- {
			if cmds[j].key == s.key {
				prev = j
				break
			}
		}
		if prev < 0 || !cmds[prev].matches(c.After) {
			return false
		}
	}
	if c.LikeFirst && !s.like(firstMatch(cmds, c.Match)) {
		return false
	}
	if c.Nth > 0 {
		n := 0
		for j := 0; j <= i; j++ {
			if cmds[j].matches(c.Match) {
				n++
			}
		}
		if n != c.Nth {
			return false
		}
	}
	if c.Every > 0 {
		lo, hi := i, i
		for lo > 0 && cmds[lo-1].matches(c.Match) {
			lo--
		}
		for hi+1 < len(cmds) && cmds[hi+1].matches(c.Match) {
			hi++
		}
		if hi-lo+1 < c.Every {
			return false
		}
		for _, s := range cmds[lo : hi+1] {
			if !s.replied || !s.succeeded {
				return false
			}
		}
	}
	return true
}

// Succeeded reports whether a reply says the command did what it asked:
// no error, not nil, not 0 and not false (what Command.Succeeded selects).
func Succeeded(cmd redis.Cmder) bool {
	if cmd.Err() != nil {
		return false
	}
	switch c := cmd.(type) {
	case *redis.BoolCmd:
		return c.Val()
	case *redis.IntCmd:
		return c.Val() != 0
	case *redis.StatusCmd:
		return c.Val() != ""
	case *redis.StringCmd:
		return c.Val() != ""
	case *redis.Cmd:
		v, err := c.Result()
		if errors.Is(err, redis.Nil) || v == nil {
			return false
		}
		switch x := v.(type) {
		case int64:
			return x != 0
		case bool:
			return x
		}
		return true
	}
	return true
}

// firstMatch is the first of cmds that matches spec; cmds holds at least
// one that does (the command being selected).
func firstMatch(cmds []sent, spec string) sent {
	for _, s := range cmds {
		if s.matches(spec) {
			return s
		}
	}
	return sent{}
}

// like reports whether s is the same command as o: the same script,
// however sent (go-redis sends an EVALSHA, then on NOSCRIPT the EVAL of
// the same script), or else the same name.
func (s sent) like(o sent) bool {
	if len(s.args) == 0 || len(o.args) == 0 {
		return false
	}
	if sc, oc := s.runs(), o.runs(); sc != "" || oc != "" {
		return sc == oc
	}
	return s.args[0] == o.args[0]
}

// runs is the SHA1 of the script s runs, an EVAL's or an EVALSHA's; ""
// for any other command.
func (s sent) runs() string {
	if s.args[0] == "evalsha" && len(s.args) > 1 {
		return s.args[1]
	}
	return s.script
}
