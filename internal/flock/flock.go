// Package flock takes a machine-wide lock on a file, so that processes
// making the same piece of the harness's cache at once (a worker's build,
// a class-data archive) make it once: the others wait, then find it. It
// imports only the standard library, as cmd/setup's packages must.
package flock

import (
	"os"
	"syscall"
)

// Take takes an exclusive lock on path, creating the file, and waits for
// it; release gives it back. A process that dies holding it gives it back
// too (the kernel's flock ends with the file's last descriptor).
func Take(path string) (release func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
