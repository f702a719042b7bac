// Command setup installs what the harness runs against when it is missing,
// and says so in one line per thing it finds or does: redis-server,
// redis-sentinel, redis-tools and libfaketime with apt-get (as root, or
// through sudo), then, once, the libc-allocator redis-server that clock
// stories run under libfaketime, built from the distribution's own redis
// source into the cache the harness looks in (~/.cache/locktorture, or
// $LOCKTORTURE_CACHE). Run again, it finds everything there and does
// nothing.
//
// It is how a CI job that tests its own lock with package locktest gets
// its machine ready, from the module that requires locktorture (the
// version its go.mod names):
//
//	go run github.com/locktorture/locktorture/cmd/setup
//
// and how scripts/setup.sh gets this repository's (with -packages for the
// packages only the repository's own tests need, and -only to run the
// install and the build as separate steps).
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/locktorture/locktorture/internal/prereq"
)

func main() {
	packages := flag.String("packages", "", "more Debian `packages` to install when missing, comma-separated")
	only := flag.String("only", "", "run one `step`: "+prereq.StepPackages+" (apt-get install, build nothing), "+prereq.StepBuild+" (build what no package provides, install nothing) or "+prereq.StepBuildReady+" (build those of them whose build tools are installed already, install nothing)")
	workers := flag.Bool("workers", false, "also build the worker programs of the library locks this repository tests (Curator's, in Java)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "setup: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	o := prereq.Options{Only: *only, Logf: func(format string, args ...any) {
		fmt.Printf("setup: "+format+"\n", args...)
	}}
	if *workers {
		o.More = prereq.Workers
	}
	for _, p := range strings.Split(*packages, ",") {
		if p = strings.TrimSpace(p); p != "" {
			o.Packages = append(o.Packages, p)
		}
	}
	if err := prereq.Setup(o); err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		os.Exit(1)
	}
}
