package cluster

import (
	"archive/zip"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/locktorture/locktorture/internal/flock"
	"github.com/locktorture/locktorture/internal/prereq"
)

// A ZooKeeper member starts from a class-data-sharing archive of the
// classes a member loads up to serving: mapped, not parsed from jars and
// verified, on every start. An ensemble is three JVMs starting at once on
// two cores, and a pair whose servers are not kept starts one (engine's
// pool), so this is start-up the matrix pays per ensemble. The archive is
// made once per machine, by a member of an ensemble of one run until it
// serves and stopped (-XX:ArchiveClassesAtExit), and kept in the cache
// under a name that changes with the JVM, the jars and the flags: the JVM
// refuses an archive made with others (and starts without it).

// zooKeeperClasspath is the member's classpath: the server jar, every jar
// its manifest names, and the logger. Each is named, not left to the
// manifest: Java 17's class-data sharing misreads a manifest's absolute
// paths (it looks for /usr/share/java//usr/share/java/x.jar), so their
// classes would load from jars on every start; and no directory (such as
// Debian's conf dir, which its launcher adds), which it refuses.
var zooKeeperClasspath = sync.OnceValue(func() []string {
	cp := []string{zooKeeperJar}
	if names, err := manifestClassPath(zooKeeperJar); err == nil {
		for _, p := range names {
			if _, err := os.Stat(p); err == nil {
				cp = append(cp, p)
			}
		}
	}
	if _, err := os.Stat(zooKeeperLogger); err == nil {
		cp = append(cp, zooKeeperLogger)
	}
	return cp
})

// manifestClassPath is the Class-Path a jar's manifest names, each entry
// a path (relative ones from the jar's directory).
func manifestClassPath(jar string) ([]string, error) {
	z, err := zip.OpenReader(jar)
	if err != nil {
		return nil, err
	}
	defer z.Close()
	f, err := z.Open("META-INF/MANIFEST.MF")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// A header's value goes on in lines that begin with one space.
	var headers []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if rest, ok := strings.CutPrefix(line, " "); ok && len(headers) > 0 {
			headers[len(headers)-1] += rest
			continue
		}
		headers = append(headers, line)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var out []string
	for _, h := range headers {
		if v, ok := strings.CutPrefix(h, "Class-Path:"); ok {
			for _, p := range strings.Fields(v) {
				if !filepath.IsAbs(p) {
					p = filepath.Join(filepath.Dir(jar), p)
				}
				out = append(out, filepath.Clean(p))
			}
		}
	}
	return out, nil
}

// zooKeeperArchive is the members' archive, made on first need in this
// process (or found, made by another) by a member of kind k: the path to
// start members with, or why there is none, in which case they start
// without one, as they would on a JVM without class-data sharing.
var zooKeeperArchive = func() func(k *Kind) (string, error) {
	var once sync.Once
	var path string
	var err error
	return func(k *Kind) (string, error) {
		once.Do(func() { path, err = findZooKeeperArchive(k) })
		return path, err
	}
}()

// findZooKeeperArchive finds the archive, or makes it.
func findZooKeeperArchive(k *Kind) (string, error) {
	path, err := zooKeeperArchivePath()
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	// Processes that start ensembles at once (the test packages beside
	// the matrix) make it once: the others wait here, then find it.
	unlock, err := flock.Take(path + ".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := trainZooKeeperArchive(k, path); err != nil {
		return "", fmt.Errorf("cluster: zookeeper's class-data archive: %w", err)
	}
	return path, nil
}

// zooKeeperArchivePath is where the archive for this machine's JVM, jars
// and the members' flags is kept.
func zooKeeperArchivePath() (string, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return "", err
	}
	if java, err = filepath.EvalSymlinks(java); err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range append([]string{java}, zooKeeperClasspath()...) {
		st, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00", f, st.Size(), st.ModTime().UnixNano())
	}
	for _, f := range zooKeeperJVM {
		fmt.Fprintf(h, "%s\x00", f)
	}
	return filepath.Join(prereq.CacheDir(), "zookeeper-member-"+hex.EncodeToString(h.Sum(nil)[:6])+".jsa"), nil
}

// trainZooKeeperArchive runs a member (of kind k) of an ensemble of one
// until it serves, then stops it, and keeps the classes it loaded at path.
// The archive is written whole beside path under another name and renamed,
// so no start maps half of one.
func trainZooKeeperArchive(k *Kind, path string) error {
	b := &local{}
	var err error
	// The member's dir is named as a cluster's is, so a harness killed
	// while it trains leaves nothing RemoveLeftovers does not find.
	if b.dir, err = os.MkdirTemp("", fmt.Sprintf("%s%d-", tempPrefix, os.Getpid())); err != nil {
		return err
	}
	defer b.Close()
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	defer os.Remove(tmp)
	// The kind as it is, but for its command line: started the way any
	// ensemble is (ports claimed, a taken one tried again), it dumps
	// the classes it loaded as it exits.
	train := *k
	train.Args = func(spec ServerSpec, at Place) ([]string, error) {
		return zooKeeperCommand(spec, at, "-XX:ArchiveClassesAtExit="+tmp)
	}
	ctx, cancel := context.WithTimeout(context.Background(), k.startTimeout())
	defer cancel()
	servers, err := b.start(ctx, []ServerSpec{{Name: "z1", Kind: &train}}, true)
	if err != nil {
		return err
	}
	p := servers[0].(*process)
	// SIGTERM is an orderly exit, in which the JVM writes the archive.
	if !p.stop(archiveWrite) {
		return fmt.Errorf("the member did not exit within %v of SIGTERM%s", archiveWrite, p.logTail())
	}
	if st, err := os.Stat(tmp); err != nil || st.Size() == 0 {
		return fmt.Errorf("the member exited without writing an archive%s", p.logTail())
	}
	return os.Rename(tmp, path)
}

// archiveWrite is how long a stopped member may take to write the
// archive and exit, which took well under a second idle: a ceiling for a
// busy machine, not a wait.
const archiveWrite = 30 * time.Second
