// Package java builds and starts the worker programs written in Java: today
// CuratorWorker, which puts Apache Curator's InterProcessMutex under test
// with the jars Debian installs (libcurator-recipes-java). It imports only
// the standard library (and internal/flock, which does too), so cmd/setup,
// which builds the worker once with the machine's other pieces, still
// compiles in seconds.
//
// A worker is compiled once with javac and its classes dumped into a
// class-data-sharing archive (a run of the worker's own train mode under
// -XX:ArchiveClassesAtExit), both kept in the harness's cache under a name
// that is a hash of the source: a JVM per client then starts from mapped
// classes instead of parsing jars, which is what makes one JVM per client
// affordable on two cores.
package java

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/locktorture/locktorture/internal/flock"
)

//go:embed CuratorWorker.java
var curatorSource []byte

// CuratorClasspath is Curator's jars as Debian installs them, every one
// named: their manifests name ZooKeeper's, Guava's and slf4j's by absolute
// paths, which Java 17's class-data sharing misreads (it looks for
// /usr/share/java//usr/share/java/guava.jar), so classes reached only
// through a manifest would load from their jars on every start. Last,
// slf4j's no-op binding, so neither Curator nor ZooKeeper writes a line the
// worker did not mean.
var CuratorClasspath = []string{
	"/usr/share/java/curator-recipes.jar",
	"/usr/share/java/curator-framework.jar",
	"/usr/share/java/curator-client.jar",
	"/usr/share/java/zookeeper.jar",
	"/usr/share/java/zookeeper-jute.jar",
	"/usr/share/java/guava.jar",
	"/usr/share/java/slf4j-api.jar",
	"/usr/share/java/slf4j-nop.jar",
}

// CuratorPackages are the Debian packages the worker is built and run
// from: the JDK for javac, Curator and its dependencies, slf4j's bindings.
var CuratorPackages = []string{"openjdk-17-jdk-headless", "libcurator-recipes-java", "libslf4j-java"}

// jvmFlags start a small client JVM fast on a busy two-core machine: a
// small heap with the serial collector (no GC threads), only the quick
// C1 compiler with one compiler thread, no perf-data file, IPv4
// loopback. The JVM's own messages go to stderr, never to stdout, which
// is the protocol's: by default it prints warnings there (a stale
// class-data archive's, say).
var jvmFlags = []string{
	"-Xshare:auto",
	"-XX:TieredStopAtLevel=1",
	"-XX:+UseSerialGC",
	"-XX:CICompilerCount=1",
	"-Xms8m", "-Xmx48m",
	"-Xss256k",
	"-XX:ReservedCodeCacheSize=16m",
	"-XX:-UsePerfData",
	"-Djava.net.preferIPv4Stack=true",
	"-Xlog:disable", "-Xlog:all=warning:stderr",
}

const (
	curatorMain = "CuratorWorker"
	// curatorJar holds the worker's classes: class-data sharing archives
	// classes from jars only, not from a directory.
	curatorJar     = "curator-worker.jar"
	curatorArchive = "curator.jsa"
)

// CuratorDir is where the worker built from this source, classpath and
// flags lives under cache: a class-data archive loads only with the
// classpath and flags it was made with, so a change to any of them is a
// new directory, built anew.
func CuratorDir(cache string) string {
	h := sha256.New()
	h.Write(curatorSource)
	for _, s := range append(slices.Clone(CuratorClasspath), jvmFlags...) {
		h.Write([]byte("\x00" + s))
	}
	return filepath.Join(cache, "curator-worker-"+hex.EncodeToString(h.Sum(nil)[:6]))
}

// FindCurator says where the built worker is, or why it is not usable.
func FindCurator(cache string) (string, error) {
	dir := CuratorDir(cache)
	for _, f := range []string{curatorJar, curatorArchive} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return "", fmt.Errorf("the Curator worker is not built at %s", dir)
		}
	}
	for _, jar := range CuratorClasspath {
		if _, err := os.Stat(jar); err != nil {
			return "", fmt.Errorf("%s not found (apt-get install %s)", jar, strings.Join(CuratorPackages, " "))
		}
	}
	return dir, nil
}

// BuildCurator compiles the worker and makes its class-data archive under
// cache, unless they are there already. Another process building the same
// source at the same time waits for it (a lock file), and a build that
// fails half-way leaves nothing behind: it is made in a temporary
// directory and renamed into place whole.
func BuildCurator(cache string) error {
	if _, err := FindCurator(cache); err == nil {
		return nil
	}
	for _, tool := range []string{"javac", "jar", "java"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("the Curator worker needs %s: apt-get install %s", tool, strings.Join(CuratorPackages, " "))
		}
	}
	for _, jar := range CuratorClasspath {
		if _, err := os.Stat(jar); err != nil {
			return fmt.Errorf("the Curator worker needs %s: apt-get install %s", jar, strings.Join(CuratorPackages, " "))
		}
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return err
	}
	unlock, err := flock.Take(filepath.Join(cache, "curator-worker.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := FindCurator(cache); err == nil {
		return nil // built by another process while this one waited
	}
	tmp, err := os.MkdirTemp(cache, "curator-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, curatorMain+".java")
	if err := os.WriteFile(src, curatorSource, 0o644); err != nil {
		return err
	}
	cp := strings.Join(CuratorClasspath, ":")
	classes := filepath.Join(tmp, "classes")
	// Inline string concatenation spares each start the bootstrap of
	// invokedynamic concatenation (10 to 20 ms).
	if out, err := exec.Command("javac", "-nowarn", "-XDstringConcat=inline", "-d", classes, "-cp", cp, src).CombinedOutput(); err != nil {
		return fmt.Errorf("javac %s: %v: %s", curatorMain, err, firstLine(out))
	}
	if out, err := exec.Command("jar", "--create", "--file", filepath.Join(tmp, curatorJar), "-C", classes, ".").CombinedOutput(); err != nil {
		return fmt.Errorf("jar %s: %v: %s", curatorJar, err, firstLine(out))
	}
	if err := os.RemoveAll(classes); err != nil {
		return err
	}
	// The archive records the classpath it was made with, so it is made
	// with the classes' final path: the build directory, renamed into
	// place, would not match. Train in place after the rename instead.
	dir := CuratorDir(cache)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	train := exec.Command("java", append(append([]string{"-XX:ArchiveClassesAtExit=" + filepath.Join(dir, curatorArchive+".tmp")}, jvmFlags...),
		"-cp", curatorClasspath(dir), curatorMain, "train")...)
	if out, err := train.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("the Curator worker's class-data archive: %v: %s", err, firstLine(out))
	}
	if err := os.Rename(filepath.Join(dir, curatorArchive+".tmp"), filepath.Join(dir, curatorArchive)); err != nil {
		os.RemoveAll(dir)
		return err
	}
	return nil
}

// curatorClasspath is the worker's jar before Curator's.
func curatorClasspath(dir string) string {
	return strings.Join(append([]string{filepath.Join(dir, curatorJar)}, CuratorClasspath...), ":")
}

// CuratorCommand is the command that starts one Curator worker, built
// first if it is not (once per process: cmd/setup builds it ahead, so a
// story never waits on javac). A build that fails is the command's Err,
// which its Start returns: the run that wanted it fails with that line.
func CuratorCommand(cache string) *exec.Cmd {
	built.Do(func() { builtErr = BuildCurator(cache) })
	dir := CuratorDir(cache)
	cmd := exec.Command("java", append(append([]string{"-XX:SharedArchiveFile=" + filepath.Join(dir, curatorArchive)}, jvmFlags...),
		"-cp", curatorClasspath(dir), curatorMain)...)
	if builtErr != nil {
		cmd.Err = builtErr
	}
	return cmd
}

var (
	built    sync.Once
	builtErr error
)

// firstLine is the first non-empty line of a tool's output, for a
// one-line error.
func firstLine(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return "(no output)"
}
