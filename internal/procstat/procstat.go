// Package procstat reads a process's state from Linux's /proc, for the
// tests that watch a worker or a harness stop, die, or linger as a zombie
// its parent has not reaped.
package procstat

import (
	"os"
	"strconv"
	"strings"
)

// State is pid's one-letter state in /proc/PID/stat (R, S, T for stopped,
// Z for a zombie), or "" once the process is gone. The state is the field
// after the command name, which is in parentheses and may hold spaces and
// parentheses of its own, so it is read after the last ')'.
func State(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) == 0 {
		return ""
	}
	return fields[0]
}
