// Command image builds the docker backend's node image from what apt gives
// (mmdebstrap, docker import, then docker/Dockerfile with the network off)
// unless an image with the same inputs exists, and prints its name. With
// -base it makes only the Debian base, which needs nothing of the
// project's own builds: `make setup` starts it while the libc-allocator
// redis-server that the node image adds is compiled.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/locktorture/locktorture/docker"
)

func main() {
	baseOnly := flag.Bool("base", false, "make only the Debian base image")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "image: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	pool, err := docker.Pool()
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(2)
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "image: "+format+"\n", args...) }
	start := time.Now()
	var name string
	if *baseOnly {
		name, err = docker.Base(context.Background(), pool, logf)
	} else {
		name, err = docker.Image(context.Background(), pool, docker.ImageOptions{Logf: logf})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("%s (ready in %s)\n", name, time.Since(start).Round(100*time.Millisecond))
}
