// Package engine runs one (scenario, lock) pair end to end: it resolves
// the options against the catalogue (package scenario), starts the cluster,
// opens every client's processes through their own links, starts the
// schedule once every client is up, records the history, and hands it to
// package verdict to judge. cmd/run and locktest are flags and tests
// around it.
package engine
