package docker

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/locktorture/locktorture/cluster"
)

var (
	//go:embed rootfs.sh
	rootfsScript []byte
	//go:embed Dockerfile
	dockerfile []byte
)

// Repository names of the two images: the mmdebstrapped base and the node
// image built on it. Tags are hashes of their inputs, so a changed input
// makes a new image and an unchanged one is never rebuilt.
const (
	BaseRepository = "locktorture-base"
	NodeRepository = "locktorture-node"
)

// ImageOptions says where the node image's inputs are.
type ImageOptions struct {
	// FaketimeServer is the libc-allocator redis-server copied into the
	// image; empty means cluster.FaketimeServerPath().
	FaketimeServer string
	// Logf hears each step that takes time (mmdebstrap, build).
	Logf func(format string, args ...any)
}

// Image returns the node image's name, building what is missing: the base
// (Base), then the Dockerfile on it with the network off (seconds).
// Nothing is pulled.
func Image(ctx context.Context, pool *dockertest.Pool, o ImageOptions) (string, error) {
	if o.FaketimeServer == "" {
		o.FaketimeServer = cluster.FaketimeServerPath()
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	server, err := os.ReadFile(o.FaketimeServer)
	if err != nil {
		return "", fmt.Errorf("docker: the node image needs the libc-allocator redis-server: %w (run `make setup`)", err)
	}
	base := BaseRepository + ":" + hash(rootfsScript)
	node := NodeRepository + ":" + hash(dockerfile, []byte(base), server)
	if exists(pool, node) {
		return node, nil
	}
	if _, err := Base(ctx, pool, logf); err != nil {
		return "", err
	}
	start := time.Now()
	if err := buildNode(ctx, pool, base, node, server); err != nil {
		return "", err
	}
	logf("docker: %s built in %s", node, time.Since(start).Round(100*time.Millisecond))
	return node, nil
}

// Base returns the base image's name, making it if it is missing: rootfs.sh
// (mmdebstrap) and `docker import`, half a minute to a minute once per
// change of rootfs.sh. It needs neither the network nor the libc-allocator
// redis-server of the node image, so setup makes it while that one builds.
func Base(ctx context.Context, pool *dockertest.Pool, logf func(format string, args ...any)) (string, error) {
	tag := hash(rootfsScript)
	base := BaseRepository + ":" + tag
	if exists(pool, base) {
		return base, nil
	}
	start := time.Now()
	logf("docker: making %s with mmdebstrap (once; under a minute)", base)
	if err := importBase(ctx, pool, tag); err != nil {
		return "", err
	}
	logf("docker: %s made in %s", base, time.Since(start).Round(time.Second))
	return base, nil
}

// buildNode builds docker/Dockerfile on base as name, with the network
// off: FROM names a local image, and nothing else can be fetched.
func buildNode(ctx context.Context, pool *dockertest.Pool, base, name string, server []byte) error {
	dir, err := os.MkdirTemp("", "locktorture-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), dockerfile, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "redis-server-libc"), server, 0o755); err != nil {
		return err
	}
	var out bytes.Buffer
	err = pool.Client.BuildImage(dc.BuildImageOptions{
		Name: name, ContextDir: dir, Dockerfile: "Dockerfile",
		BuildArgs:   []dc.BuildArg{{Name: "BASE", Value: base}},
		NetworkMode: "none", RmTmpContainer: true, ForceRmTmpContainer: true,
		OutputStream: &out, Context: ctx,
	})
	if err != nil {
		return fmt.Errorf("docker: build %s: %w\n%s", name, err, tail(out.String()))
	}
	return nil
}

// importBase runs rootfs.sh and imports its tar as the base image tagged
// tag.
func importBase(ctx context.Context, pool *dockertest.Pool, tag string) error {
	if os.Geteuid() != 0 {
		return errors.New("docker: making the base image needs root (mmdebstrap); run `make setup` as root once")
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return errors.New("docker: mmdebstrap not found: run `make setup` (apt-get install mmdebstrap)")
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", string(rootfsScript))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	tar, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	importErr := pool.Client.ImportImage(dc.ImportImageOptions{Repository: BaseRepository, Tag: tag, Source: "-",
		InputStream: tar, OutputStream: io.Discard, Context: ctx})
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("docker: rootfs.sh: %w\n%s", err, tail(stderr.String()))
	}
	if importErr != nil {
		return fmt.Errorf("docker: import %s:%s: %w", BaseRepository, tag, importErr)
	}
	return nil
}

func exists(pool *dockertest.Pool, image string) bool {
	_, err := pool.Client.InspectImage(image)
	return err == nil
}

// hash is the first 12 hex digits of the sha256 of parts.
func hash(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	return fmt.Sprintf("%x", h.Sum(nil))[:12]
}

// tail is the last lines of a command's output, for an error.
func tail(s string) string {
	const keep = 2000
	if len(s) > keep {
		s = "…" + s[len(s)-keep:]
	}
	return s
}
