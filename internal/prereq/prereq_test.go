package prereq

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The libc-allocator redis-server is built and looked for (cluster asks
// FaketimeServerPath too) where the overrides say, most specific first.
func TestFaketimeServerPathFollowsTheOverrides(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"XDG_CACHE_HOME": dir, "LOCKTORTURE_CACHE": "", "LOCKTORTURE_FAKETIME_REDIS": ""},
			filepath.Join(dir, "locktorture", "redis-libc", "redis-server")},
		{map[string]string{"LOCKTORTURE_CACHE": filepath.Join(dir, "cache"), "LOCKTORTURE_FAKETIME_REDIS": ""},
			filepath.Join(dir, "cache", "redis-libc", "redis-server")},
		{map[string]string{"LOCKTORTURE_CACHE": filepath.Join(dir, "cache"), "LOCKTORTURE_FAKETIME_REDIS": filepath.Join(dir, "mine")},
			filepath.Join(dir, "mine")},
	} {
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		if got := FaketimeServerPath(); got != c.want {
			t.Errorf("%v: %s, want %s", c.env, got, c.want)
		}
	}
}

// A missing piece is one line naming it and the command that installs it;
// a binary you named yourself has no such command.
func TestMissingIsOneLineNamingTheFix(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("LOCKTORTURE_FAKETIME_REDIS", filepath.Join(t.TempDir(), "redis-server"))
	for _, c := range []struct {
		p    Piece
		want string
	}{
		{RedisServer, "redis-server not found on PATH: run " + Fix},
		{RedisSentinel, "redis-sentinel not found on PATH: run " + Fix},
		{FaketimeServer, "the libc-allocator redis-server (for clock stories: libfaketime hangs the jemalloc build) not found at " +
			os.Getenv("LOCKTORTURE_FAKETIME_REDIS") + ": run " + Fix},
		{Command("/opt/mine/redis-server"), "/opt/mine/redis-server not found"},
	} {
		err := Check(c.p)
		var m *Missing
		if !errors.As(err, &m) || m.Piece != c.p.Name || err.Error() != c.want {
			t.Errorf("%s: got %v, want %q", c.p.Name, err, c.want)
		}
	}
	// A jemalloc build where the libc one belongs would hang under
	// libfaketime: it is not the piece.
	fake := filepath.Join(t.TempDir(), "redis-server")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=0'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LOCKTORTURE_FAKETIME_REDIS", fake)
	t.Setenv("PATH", "/usr/bin:/bin") // the shell the fake runs under
	if err := Check(FaketimeServer); err == nil || !strings.Contains(err.Error(), "is not built with the libc allocator") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a jemalloc build at the libc build's path: got %v", err)
	}
}

// Setup run again on a machine it has set up (make test runs it first)
// finds everything there at once and installs and builds nothing.
func TestSetupAgainFindsEverythingThere(t *testing.T) {
	for _, p := range Pieces {
		if err := Check(p); err != nil {
			t.Skipf("this machine is not set up (%v): the second run is what is tested", err)
		}
	}
	var lines []string
	start := time.Now()
	err := Setup(Options{Logf: func(format string, args ...any) {
		lines = append(lines, format)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a second run took %v", d)
	}
	if len(lines) != len(Pieces)+1 || lines[len(lines)-1] != "everything is there (%s)" {
		t.Errorf("want one line per piece, each there, and everything is there; got %q", lines)
	}
	for _, l := range lines[:len(lines)-1] {
		if l != "%s: there (%s)" {
			t.Errorf("line %q: want every piece there", l)
		}
	}
}

// The build-ready step (run beside apt-get) builds a missing piece whose
// build tools are installed and leaves one whose tools apt-get has yet to
// install for the build step, naming it.
func TestBuildReadyLeavesWhatWaitsForPackages(t *testing.T) {
	for _, p := range Pieces {
		if err := Check(p); err != nil {
			t.Skipf("this machine is not set up (%v): the step would build the pieces for real", err)
		}
	}
	built := map[string]bool{}
	piece := func(name, pkg string) Piece {
		return Piece{Name: name, Packages: []string{pkg},
			Find: func() (string, error) {
				if !built[name] {
					return "", errors.New("not built")
				}
				return "/built/" + name, nil
			},
			Build: func(func(string, ...any)) error { built[name] = true; return nil }}
	}
	var last string
	err := Setup(Options{Only: StepBuildReady, More: []Piece{piece("ready", "dpkg"), piece("waiting", "locktorture-no-such-package")},
		Logf: func(format string, args ...any) { last = fmt.Sprintf(format, args...) }})
	if err != nil {
		t.Fatal(err)
	}
	if !built["ready"] || built["waiting"] {
		t.Errorf("built %v: want the piece whose tools are installed, not the one waiting for apt-get", built)
	}
	if !strings.HasSuffix(last, "left for the build step: waiting") {
		t.Errorf("last line %q: want it to name the piece left for the build step", last)
	}
	if err := Setup(Options{Only: "buld"}); err == nil || !strings.Contains(err.Error(), StepBuildReady) {
		t.Errorf("an unknown step: got %v, want an error naming the steps", err)
	}
}

// The deb-src twins keep each distribution entry's mirrors, suites,
// components and keys, and leave out third parties' repositories, which
// may have no sources and would fail apt-get update.
func TestSourceTwins(t *testing.T) {
	mirrors := filepath.Join(t.TempDir(), "apt-mirrors.txt")
	if err := os.WriteFile(mirrors, []byte("http://azure.archive.ubuntu.com/ubuntu/\tpriority:1\nhttp://archive.ubuntu.com/ubuntu/\tpriority:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	debian := aptFile{name: "/etc/apt/sources.list.d/debian.sources", text: `Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`}
	nodesource := aptFile{name: "/etc/apt/sources.list.d/nodesource.sources", text: "Types: deb\nURIs: https://deb.nodesource.com/node_20.x\nSuites: nodistro\nComponents: main\n"}
	// GitHub's Ubuntu runners: mirrors in a file, redis in universe.
	ubuntu := aptFile{name: "/etc/apt/sources.list.d/ubuntu.sources", text: "Types: deb\nURIs: mirror+file:" + mirrors +
		"\nSuites: noble noble-updates noble-backports\nComponents: main universe restricted multiverse\nSigned-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg\n\n" +
		"Types: deb\nURIs: http://security.ubuntu.com/ubuntu\nSuites: noble-security\nComponents: main universe restricted multiverse\nEnabled: no\n"}
	oneLine := aptFile{name: "/etc/apt/sources.list", text: "deb http://deb.debian.org/debian bookworm main\n# deb http://deb.debian.org/debian bookworm-backports main\n" +
		"deb [arch=amd64 signed-by=/usr/share/keyrings/microsoft.gpg] https://packages.microsoft.com/ubuntu/24.04/prod noble main\n" +
		"deb [signed-by=/usr/share/keyrings/ubuntu.gpg] http://ports.ubuntu.com/ubuntu-ports jammy main universe\n"}

	got, err := sourceTwins([]aptFile{debian, nodesource, ubuntu, oneLine}, map[string]string{"ID": "debian", "VERSION_CODENAME": "bookworm"})
	if err != nil {
		t.Fatal(err)
	}
	wantDeb822 := strings.ReplaceAll(debian.text, "Types: deb\n", "Types: deb-src\n") + "\n" +
		"Types: deb-src\nURIs: mirror+file:" + mirrors + "\nSuites: noble noble-updates noble-backports\nComponents: main universe restricted multiverse\nSigned-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg\n\n"
	if got.deb822 != wantDeb822 {
		t.Errorf("deb822 twins:\n%s\nwant:\n%s", got.deb822, wantDeb822)
	}
	wantOneLine := "deb-src http://deb.debian.org/debian bookworm main\ndeb-src [signed-by=/usr/share/keyrings/ubuntu.gpg] http://ports.ubuntu.com/ubuntu-ports jammy main universe\n"
	if got.oneLine != wantOneLine {
		t.Errorf("one-line twins:\n%s\nwant:\n%s", got.oneLine, wantOneLine)
	}

	// No distribution entry at all: the distribution's default archive.
	got, err = sourceTwins([]aptFile{nodesource}, map[string]string{"ID": "ubuntu", "VERSION_CODENAME": "noble"})
	if err != nil || !strings.Contains(got.deb822, "URIs: http://archive.ubuntu.com/ubuntu\nSuites: noble noble-updates noble-security\nComponents: main universe\n") {
		t.Errorf("Ubuntu with no entry: got %q, %v", got.deb822, err)
	}
	if _, err := sourceTwins(nil, map[string]string{"ID": "fedora", "VERSION_CODENAME": "x"}); err == nil {
		t.Error("a machine that is neither Debian nor Ubuntu got deb-src entries")
	}
}
