package locks

// builtins are the reference locks, one function per file that registers
// what the file holds: a new lock is a file with its function and a line
// here.
var builtins = []func(register func(Info)){
	registerSetNXPX,        // setnxpx.go
	registerSetNXPXDel,     // setnxpx_del.go
	registerSetNXExpire,    // setnx_expire.go
	registerSetNXPXFenced,  // setnxpx_fenced.go
	registerSetNXPXWait,    // setnxpx_wait.go
	registerGetSet,         // getset.go
	registerRedLock,        // redlock.go
	registerReentrant,      // reentrant.go
	registerReentrantLost,  // reentrant_lost.go
	registerReentrantAsync, // reentrant_async.go
	registerFair,           // fair.go
	registerMultiLock,      // multilock.go
	registerControls,       // control.go
}

// The reference locks are this package's own: they are in the registry
// from the start, while the installed libraries' adapters (package
// locks/library) are registered by the program that wants them.
func init() {
	for _, b := range builtins {
		b(Register)
	}
}
