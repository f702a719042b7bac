// Package prereq is what a machine needs to run the stories on local
// processes, how to tell whether each piece is there, and how to get it
// when it is not: one list, so cmd/setup (which scripts/setup.sh runs too)
// installs exactly what locktest checks for before a story starts. It
// imports only the standard library, so `go run .../cmd/setup` compiles in
// seconds on a fresh CI machine, before any of the harness's dependencies
// are downloaded.
package prereq

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/locktorture/locktorture/locks/library/java"
)

// Fix is the command that installs every piece. Run from a module that
// requires locktorture, it builds the version that module's go.mod names;
// from anywhere else, add @version.
const Fix = "go run github.com/locktorture/locktorture/cmd/setup"

// Piece is one thing the harness runs.
type Piece struct {
	// Name is what messages call it.
	Name string
	// Packages are the Debian (and Ubuntu) packages that provide it or,
	// for a piece with Build, the tools its build needs.
	Packages []string
	// Find says where the piece is, or why it is not usable.
	Find func() (string, error)
	// Build, when set, makes the piece (at the path Find looks at) once
	// Packages are installed; logf hears each step that takes time.
	Build func(logf func(format string, args ...any)) error
}

// Pieces are what setup installs, in the order it checks them.
var Pieces = []Piece{RedisServer, RedisSentinel, RedisCLI, Libfaketime, FaketimeServer}

// The pieces. The harness runs redis-server for every node and
// redis-sentinel for failovers; redis-cli is for poking at a node by hand;
// a node with a faked clock runs FaketimeServer under Libfaketime.
var (
	RedisServer   = Piece{Name: "redis-server", Packages: []string{"redis-server"}, Find: onPath("redis-server")}
	RedisSentinel = Piece{Name: "redis-sentinel", Packages: []string{"redis-sentinel"}, Find: onPath("redis-sentinel")}
	RedisCLI      = Piece{Name: "redis-cli", Packages: []string{"redis-tools"}, Find: onPath("redis-cli")}
	Libfaketime   = Piece{Name: "libfaketime", Packages: []string{"libfaketime"}, Find: findLibfaketime}
	// FaketimeServer is redis-server built with the libc allocator:
	// libfaketime hangs Debian's jemalloc build (jemalloc calls
	// clock_gettime while libfaketime initialises and recurses), so no
	// package provides it. It is built from the distribution's own redis
	// source package (dpkg-dev unpacks it).
	FaketimeServer = Piece{Name: faketimeServerName, Packages: []string{"gcc", "make", "libc6-dev", "dpkg-dev"},
		Find: findFaketimeServer, Build: buildFaketimeServer}
)

// Workers are the worker programs of the library locks this repository
// puts under test that need building: pieces setup makes only when asked
// (cmd/setup -workers), since a user testing a lock of their own needs
// none of them.
var Workers = []Piece{CuratorWorker}

// CuratorWorker is the Java worker around Apache Curator's
// InterProcessMutex, compiled once with javac and given a class-data
// archive, in the cache.
var CuratorWorker = Piece{Name: "Curator worker", Packages: java.CuratorPackages,
	Find:  func() (string, error) { return java.FindCurator(CacheDir()) },
	Build: func(func(string, ...any)) error { return java.BuildCurator(CacheDir()) }}

// faketimeServerName is FaketimeServer's name, which its build's lines
// carry.
const faketimeServerName = "libc-allocator redis-server"

// Missing is a piece the machine lacks. Its message is one line: what is
// missing, and the command that installs it.
type Missing struct {
	// Piece is the missing piece's name.
	Piece string
	// Why says what was looked for and not found.
	Why string
	// Setup says whether Fix installs it: not a binary of your own that
	// you named.
	Setup bool
}

func (m *Missing) Error() string {
	if !m.Setup {
		return m.Why
	}
	return m.Why + ": run " + Fix
}

// Check returns a *Missing for p, or nil when Find finds it.
func Check(p Piece) error {
	if _, err := p.Find(); err != nil {
		return &Missing{Piece: p.Name, Why: err.Error(), Setup: len(p.Packages) > 0 || p.Build != nil}
	}
	return nil
}

// Command returns the piece that runs the binary name (as the local
// backend finds it: on PATH, or at name when it has a slash); a name
// other than redis-server's, such as a build of your own, is its own piece
// with nothing to install.
func Command(name string) Piece {
	if name == "" || name == RedisServer.Name {
		return RedisServer
	}
	return Piece{Name: name, Find: onPath(name)}
}

// onPath finds a command as exec.Command would.
func onPath(name string) func() (string, error) {
	return func() (string, error) {
		p, err := exec.LookPath(name)
		if err != nil {
			if strings.Contains(name, "/") {
				return "", fmt.Errorf("%s not found", name)
			}
			return "", fmt.Errorf("%s not found on PATH", name)
		}
		return p, nil
	}
}

// LibfaketimeGlob is where the local backend looks for libfaketime.so.1:
// Debian's and Ubuntu's multiarch directory.
const LibfaketimeGlob = "/usr/lib/*/faketime/libfaketime.so.1"

func findLibfaketime() (string, error) {
	found, _ := filepath.Glob(LibfaketimeGlob)
	if len(found) == 0 {
		return "", fmt.Errorf("libfaketime not found (%s, for clock stories)", LibfaketimeGlob)
	}
	return found[0], nil
}

// FaketimeServerPath is where the libc-allocator redis-server is looked for
// and built: $LOCKTORTURE_FAKETIME_REDIS, else redis-libc/redis-server
// under $LOCKTORTURE_CACHE, else under locktorture in the user's cache dir
// ($XDG_CACHE_HOME or ~/.cache). cluster.FaketimeServerPath asks it, so
// the harness looks where setup builds.
func FaketimeServerPath() string {
	if p := os.Getenv("LOCKTORTURE_FAKETIME_REDIS"); p != "" {
		return p
	}
	return filepath.Join(CacheDir(), "redis-libc", "redis-server")
}

// CacheDir is where what the harness builds once for every run is kept:
// $LOCKTORTURE_CACHE, else locktorture in the user's cache dir
// ($XDG_CACHE_HOME or ~/.cache).
func CacheDir() string {
	if cache := os.Getenv("LOCKTORTURE_CACHE"); cache != "" {
		return cache
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "locktorture")
}

// findFaketimeServer finds the build at FaketimeServerPath and asks it
// which allocator it has: a jemalloc binary there would hang under
// libfaketime.
func findFaketimeServer() (string, error) {
	p := FaketimeServerPath()
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("the libc-allocator redis-server (for clock stories: libfaketime hangs the jemalloc build) not found at %s", p)
	}
	out, err := exec.Command(p, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("the libc-allocator redis-server at %s does not run: %v", p, firstLine(err))
	}
	if !bytes.Contains(out, []byte("malloc=libc")) {
		return "", fmt.Errorf("the redis-server at %s is not built with the libc allocator (%s)", p, strings.TrimSpace(string(out)))
	}
	return p, nil
}

// firstLine is err with the first line of what the command wrote to
// stderr, when it wrote anything: messages here are one line.
func firstLine(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) && len(exit.Stderr) > 0 {
		line, _, _ := strings.Cut(strings.TrimSpace(string(exit.Stderr)), "\n")
		return err.Error() + ": " + line
	}
	return err.Error()
}
