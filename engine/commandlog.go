package engine

import (
	"os"
	"path/filepath"

	"github.com/locktorture/locktorture/nemesis"
)

// commandLogFile is where a run that did not match its expectation keeps
// when the lock issued each command of its connections and when it was
// answered (nemesis.WriteTrace): beside its servers' logs, what a
// verdict that surprised may hang on.
const commandLogFile = "commands.tsv"

// keepCommands writes the gate's trace for a run that did not match its
// expectation, or that failed once it had clients; a matched run keeps
// none, as it keeps no server logs.
func (r *runner) keepCommands() {
	if r.res == nil || r.res.Matched || r.res.Dir == "" || r.env == nil || r.env.Gate == nil {
		return
	}
	cmds, dropped := r.env.Gate.Trace()
	if len(cmds) == 0 {
		return // a lock whose connections are not the gate's (a service's, a worker's)
	}
	f, err := os.Create(filepath.Join(r.res.Dir, commandLogFile))
	if err == nil {
		err = nemesis.WriteTrace(f, cmds, dropped)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		r.logf("the commands' log not kept: %v", err)
		return
	}
	r.res.CommandLog = commandLogFile
}
