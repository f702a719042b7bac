// Package library puts the Redis locks people install under test. Each
// adapter is one file that uses its library as the library's own README
// does (its options, its retries, its clock, its way to extend a lease) and
// sorts the library's errors into the three the harness judges by:
// locks.ErrNotAcquired (certainly not held), locks.ErrNotHeld (the release
// deleted nothing) and locks.ErrUnknown (a command's outcome is unknown).
// Import it for its side effect of registering the adapters.
package library

import "fmt"

// classified wraps a library's error in the harness's kind of it, keeping
// the library's words for the report.
func classified(kind error, step string, err error) error {
	return fmt.Errorf("%w: %s: %v", kind, step, err)
}
