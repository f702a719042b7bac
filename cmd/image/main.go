// Command image builds the docker backend's node image from what apt gives
// (debootstrap, docker import, then docker/Dockerfile with the network
// off) unless an image with the same inputs exists, and prints its name.
// `make setup` runs it when a Docker engine answers.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/locktorture/locktorture/docker"
)

func main() {
	pool, err := docker.Pool()
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(2)
	}
	start := time.Now()
	name, err := docker.Image(context.Background(), pool, docker.ImageOptions{
		Logf: func(format string, args ...any) { fmt.Fprintf(os.Stderr, "image: "+format+"\n", args...) }})
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("%s (ready in %s)\n", name, time.Since(start).Round(100*time.Millisecond))
}
