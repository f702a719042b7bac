package prereq

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// The steps Options.Only can name.
const (
	// StepPackages installs packages and builds nothing.
	StepPackages = "packages"
	// StepBuild builds what no package provides and installs nothing.
	StepBuild = "build"
	// StepBuildReady builds, of what no package provides, the pieces
	// whose build tools are installed already, and installs nothing: on a
	// machine with a compiler it can run beside StepPackages, and
	// StepBuild after both finds those pieces there.
	StepBuildReady = "build-ready"
)

// Options says what Setup does besides the pieces.
type Options struct {
	// Packages are more Debian packages to install when they are not
	// installed (scripts/setup.sh: python3 and python3-redis for the
	// redis-py lock, mmdebstrap for the docker backend's image).
	Packages []string
	// More are pieces to check, install and build after Pieces
	// (scripts/setup.sh: Workers, the library locks' worker programs).
	More []Piece
	// Only limits Setup to one step, StepPackages, StepBuild or
	// StepBuildReady; empty is packages then build (the packages are the
	// build's tools).
	Only string
	// Logf hears one line per thing Setup finds or does.
	Logf func(format string, args ...any)
}

// Setup installs with apt-get (as root, or through sudo) the packages of
// every missing piece and those of o.Packages that are not installed, then
// builds the pieces no package provides. A piece that is there is left
// alone: a second run installs and builds nothing, and costs a PATH lookup
// per piece, one dpkg-query and one redis-server --version.
func Setup(o Options) error {
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	building := o.Only == StepBuild || o.Only == StepBuildReady
	if o.Only != "" && o.Only != StepPackages && !building {
		return fmt.Errorf("unknown step %q (want %s, %s or %s)", o.Only, StepPackages, StepBuild, StepBuildReady)
	}
	start := time.Now()
	did := false
	missing := findMissing(append(slices.Clone(Pieces), o.More...), building, logf)
	var waiting []Piece
	if o.Only == StepBuildReady {
		ready, later, err := readyToBuild(missing, logf)
		if err != nil {
			return err
		}
		missing, waiting = ready, later
	}
	if !building {
		left, installed, err := installPackages(o.Packages, missing, logf)
		if err != nil {
			return err
		}
		missing, did = left, installed
	}
	if o.Only != StepPackages {
		built, err := buildPieces(missing, logf)
		if err != nil {
			return err
		}
		missing, did = waiting, did || built
	}
	logDone(time.Since(start), missing, did, logf)
	return nil
}

// findMissing lists the pieces that are not there (only those built, if
// builtOnly), saying of each whether it is.
func findMissing(pieces []Piece, builtOnly bool, logf func(string, ...any)) []Piece {
	var missing []Piece
	for _, p := range pieces {
		if builtOnly && p.Build == nil {
			continue
		}
		if path, err := p.Find(); err == nil {
			logf("%s: there (%s)", p.Name, path)
		} else {
			logf("%s: missing", p.Name)
			missing = append(missing, p)
		}
	}
	return missing
}

// readyToBuild splits pieces into those whose build tools (their
// Packages) are all installed and those that wait for apt-get, saying of
// each of the latter what it waits for.
func readyToBuild(pieces []Piece, logf func(string, ...any)) (ready, later []Piece, err error) {
	for _, p := range pieces {
		need, err := notInstalled(p.Packages)
		if err != nil {
			return nil, nil, err
		}
		if len(need) > 0 {
			logf("%s: its build waits for %s", p.Name, strings.Join(need, " "))
			later = append(later, p)
			continue
		}
		ready = append(ready, p)
	}
	return ready, later, nil
}

// installPackages installs extra and the packages of the missing pieces
// that are not installed, and returns the missing pieces left to build and
// whether it installed anything. What a package provides must be there
// after: a piece still missing is an error.
func installPackages(extra []string, missing []Piece, logf func(string, ...any)) ([]Piece, bool, error) {
	want := slices.Clone(extra)
	for _, p := range missing {
		want = append(want, p.Packages...)
	}
	need, err := notInstalled(want)
	if err != nil {
		return nil, false, err
	}
	installed := false
	if len(need) > 0 {
		if err := aptInstall(need, logf); err != nil {
			return nil, false, err
		}
		installed = true
	} else if len(extra) > 0 {
		logf("packages %s: there", strings.Join(extra, " "))
	}
	var left []Piece
	for _, p := range missing {
		if p.Build != nil {
			left = append(left, p)
			continue
		}
		path, err := p.Find()
		if err != nil {
			return nil, false, fmt.Errorf("%s: still missing after apt-get install %s: %v", p.Name, strings.Join(p.Packages, " "), err)
		}
		logf("%s: installed (%s)", p.Name, path)
	}
	return left, installed, nil
}

// buildPieces builds each of pieces and finds it built, and says whether
// it built anything.
func buildPieces(pieces []Piece, logf func(string, ...any)) (bool, error) {
	for _, p := range pieces {
		begun := time.Now()
		if err := p.Build(logf); err != nil {
			return false, fmt.Errorf("%s: %w", p.Name, err)
		}
		path, err := p.Find()
		if err != nil {
			return false, fmt.Errorf("%s: built, yet %v", p.Name, err)
		}
		logf("%s: built in %s (%s)", p.Name, time.Since(begun).Round(time.Second), path)
	}
	return len(pieces) > 0, nil
}

// logDone says how Setup ended and how long it took: with pieces left for
// the build step (after the packages step, or the build of the pieces
// ready to build), having installed or built something, or finding
// everything there.
func logDone(took time.Duration, left []Piece, did bool, logf func(string, ...any)) {
	took = took.Round(time.Millisecond)
	if took > time.Second {
		took = took.Round(100 * time.Millisecond)
	}
	switch {
	case len(left) > 0:
		names := make([]string, len(left))
		for i, p := range left {
			names[i] = p.Name
		}
		logf("done in %s; left for the build step: %s", took, strings.Join(names, ", "))
	case did:
		logf("done in %s", took)
	default:
		logf("everything is there (%s)", took)
	}
}

// notInstalled is pkgs less those dpkg says are installed, without
// repeats, in their order.
func notInstalled(pkgs []string) ([]string, error) {
	var uniq []string
	for _, p := range pkgs {
		if !slices.Contains(uniq, p) {
			uniq = append(uniq, p)
		}
	}
	if len(uniq) == 0 {
		return nil, nil
	}
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		return nil, fmt.Errorf("this machine has no dpkg-query (not Debian or Ubuntu): install %s with its package manager, or put the binaries on PATH", strings.Join(uniq, " "))
	}
	// dpkg-query exits 1 when it knows a package not at all; its lines
	// for the others still say which are installed.
	out, _ := exec.Command("dpkg-query", append([]string{"-W", "-f=${Package} ${Status}\n"}, uniq...)...).Output()
	installed := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		name, status, ok := strings.Cut(line, " ")
		if ok && status == "install ok installed" {
			installed[name] = true
		}
	}
	var need []string
	for _, p := range uniq {
		if !installed[p] {
			need = append(need, p)
		}
	}
	return need, nil
}

// aptInstall runs apt-get update and install, as root or through sudo.
func aptInstall(pkgs []string, logf func(string, ...any)) error {
	list := strings.Join(pkgs, " ")
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("this machine has no apt-get: install %s with its package manager", list)
	}
	var prefix []string
	how := "as root"
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("sudo"); err != nil {
			return fmt.Errorf("apt-get install %s needs root or sudo, and there is no sudo", list)
		}
		prefix, how = []string{"sudo"}, "through sudo"
	}
	logf("installing %s with apt-get, %s", list, how)
	start := time.Now()
	// env sets the frontend for apt-get itself: sudo resets the
	// environment it was started with.
	apt := append(prefix, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get")
	if err := run(apt, "-qq", "update"); err != nil {
		return err
	}
	if err := run(apt, append([]string{"install", "-y", "-qq", "--no-install-recommends"}, pkgs...)...); err != nil {
		return err
	}
	logf("installed %s in %s", list, time.Since(start).Round(time.Second))
	return nil
}

// run runs argv then args; see runCmd.
func run(argv []string, args ...string) error {
	all := append(slices.Clone(argv), args...)
	cmd := exec.Command(all[0], all[1:]...)
	cmd.Stdin = os.Stdin // sudo may ask for a password
	return runCmd(cmd)
}

// runCmd runs cmd with what it writes kept, and shown (its last lines)
// only when it fails.
func runCmd(cmd *exec.Cmd) error {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, tail(out.String(), 20))
	}
	return nil
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
