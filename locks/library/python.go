package library

import (
	_ "embed"
	"os/exec"
)

// pythonProtocol is the protocol's Python half that every Python worker
// shares: the harness runs it ahead of the worker's own file.
//
//go:embed protocol.py
var pythonProtocol string

// python is Debian's interpreter, the one Debian's python3 packages serve
// (make setup installs them); a pyenv or virtualenv python3 earlier on
// PATH would not see them.
const python = "/usr/bin/python3"

// pythonWorker starts one client of a Python worker: the shared protocol,
// then the worker's own file, which ends by serving it.
func pythonWorker(source string) func() *exec.Cmd {
	code := pythonProtocol + "\n" + source
	return func() *exec.Cmd { return exec.Command(python, "-c", code) }
}
