package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
)

// A run that did not match its expectation keeps what its local servers
// logged while it had them, in servers/<node>.log of its directory: the
// cause of a surprising verdict may be where only a server saw it (a
// session that outlived its client, a member's election, a restart's
// recovery). The logs are copied as the run hands its servers on or stops
// them, since the next run's lines follow in the same file and a stopped
// node's directory is removed, and dropped again once the run is judged
// and matched. A server writes some lines after the clients have gone (a
// session's end, PostgreSQL's once its backend reads the close), so where
// the pool keeps the servers they are copied again once its reset has
// ended what was left (cluster.Cluster.LogEnds); a run that stops its
// servers may miss its last milliseconds' lines.

// serverLogsDir is where a run keeps its servers' logs.
const serverLogsDir = "servers"

// serverLogMax bounds each node's copy, its end kept: a run of an hour
// may log without bound, and the story's end is where a verdict is made.
const serverLogMax = 1 << 20

// markLogs notes where each node's log ends as the run takes servers
// another run left (after the pool's reset and check of them): its own
// lines start there. A run's own servers log from their start.
func (r *runner) markLogs() { r.logFrom = r.cl.LogSizes() }

// copyLogs copies each node's log, from where the run's lines start to
// ends (nil: to where each ends now), into the run's directory, over an
// earlier copy.
func (r *runner) copyLogs(ends map[string]int64) {
	if r.cl == nil || r.res == nil || r.res.Dir == "" {
		return
	}
	r.logsCopied = true
	for _, n := range r.cl.Nodes() {
		src := n.LogFile()
		if src == "" {
			continue
		}
		to, ok := ends[n.Name]
		if !ok {
			to = -1
		}
		name := path.Join(serverLogsDir, n.Name+".log") // a link on the run's page too
		if err := copyTail(src, r.logFrom[n.Name], to, filepath.Join(r.res.Dir, filepath.FromSlash(name))); err != nil {
			r.logf("the log of %s not kept: %v", n.Name, err)
			continue
		}
		if !slices.Contains(r.res.ServerLogs, name) {
			r.res.ServerLogs = append(r.res.ServerLogs, name)
		}
	}
}

// dropLogs removes the copies of a run that matched its expectation.
func (r *runner) dropLogs() {
	if r.res == nil || !r.res.Matched {
		return
	}
	if err := os.RemoveAll(filepath.Join(r.res.Dir, serverLogsDir)); err == nil {
		r.res.ServerLogs = nil
	}
}

// copyTail copies src from offset from to offset to (below 0: its end),
// at most serverLogMax bytes of it, the last ones, to dst.
func copyTail(src string, from, to int64, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	end := fi.Size()
	if to >= 0 {
		end = min(end, to)
	}
	if end < from {
		return fmt.Errorf("%s ends at %d bytes, before the %d it had as the run began", src, end, from)
	}
	from = max(from, end-serverLogMax)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, io.NewSectionReader(in, from, end-from))
	return errors.Join(err, out.Close())
}
