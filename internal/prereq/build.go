package prereq

import (
	"bufio"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// buildFaketimeServer fetches the distribution's own redis source package
// (apt-get source, through a private apt configuration of deb-src twins
// of the machine's distribution entries, so the machine's sources are left
// as they are and no root is needed), builds it with the libc allocator and
// puts redis-server at FaketimeServerPath.
func buildFaketimeServer(logf func(string, ...any)) error {
	out := FaketimeServerPath()
	work, err := os.MkdirTemp("", "locktorture-redis-libc-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	// apt fetches as _apt when run as root, which must be able to read here.
	if err := os.Chmod(work, 0o755); err != nil {
		return err
	}
	aptDir := filepath.Join(work, "apt")
	parts := filepath.Join(aptDir, "sources.list.d")
	for _, d := range []string{parts, filepath.Join(aptDir, "lists", "partial"), filepath.Join(aptDir, "cache", "archives", "partial")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	twins, err := sourceTwins(readAptSources(), readOSRelease())
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(parts, "src.sources"), []byte(twins.deb822), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(parts, "src.list"), []byte(twins.oneLine), 0o644); err != nil {
		return err
	}
	apt := []string{"apt-get", "-qq",
		"-o", "Dir::Etc::SourceList=/dev/null", "-o", "Dir::Etc::SourceParts=" + parts,
		"-o", "Dir::State::Lists=" + filepath.Join(aptDir, "lists"), "-o", "Dir::Cache=" + filepath.Join(aptDir, "cache"),
		"-o", "Debug::NoLocking=1"}
	logf("%s: fetching the distribution's redis source (apt-get source)", faketimeServerName)
	if err := run(apt, "update"); err != nil {
		return err
	}
	fetch := exec.Command(apt[0], append(apt[1:], "source", "redis")...)
	fetch.Dir = work
	if err := runCmd(fetch); err != nil {
		return err
	}
	found, _ := filepath.Glob(filepath.Join(work, "redis-*", "src"))
	if len(found) == 0 {
		return errors.New("apt-get source redis gave no source tree")
	}
	src := filepath.Dir(found[0])

	logf("%s: building %s with MALLOC=libc (20 to 45 s on 2 cores; once, then cached)", faketimeServerName, filepath.Base(src))
	build := exec.Command("make", "-C", src, fmt.Sprintf("-j%d", runtime.NumCPU()), "MALLOC=libc", "BUILD_TLS=no", "USE_SYSTEMD=no")
	// Its own job count, not that of a make this may run under (make test
	// runs setup beside lint): an inherited jobserver stalls this build.
	build.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return name == "MAKEFLAGS" || name == "MFLAGS" || name == "MAKELEVEL"
	})
	if err := runCmd(build); err != nil {
		return err
	}
	bin, err := os.ReadFile(filepath.Join(src, "src", "redis-server"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	// Written aside and renamed, so a build cut short never leaves half a
	// binary where the harness looks.
	if err := os.WriteFile(out+".tmp", bin, 0o755); err != nil {
		return err
	}
	return os.Rename(out+".tmp", out)
}

// aptFile is one file of the machine's apt sources.
type aptFile struct {
	name string // its path; .sources files are deb822, the rest one-line
	text string
}

// readAptSources reads the machine's apt source files.
func readAptSources() []aptFile {
	var names []string
	names = append(names, "/etc/apt/sources.list")
	for _, pattern := range []string{"/etc/apt/sources.list.d/*.list", "/etc/apt/sources.list.d/*.sources"} {
		more, _ := filepath.Glob(pattern)
		names = append(names, more...)
	}
	var files []aptFile
	for _, n := range names {
		if b, err := os.ReadFile(n); err == nil {
			files = append(files, aptFile{name: n, text: string(b)})
		}
	}
	return files
}

// readOSRelease is /etc/os-release's fields.
func readOSRelease() map[string]string {
	fields := map[string]string{}
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return fields
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			fields[k] = strings.Trim(v, `"'`)
		}
	}
	return fields
}

// twins are deb-src entries in both of apt's formats.
type twins struct {
	deb822, oneLine string
}

// sourceTwins makes a deb-src twin of every entry of files that names the
// distribution's own archive (same mirrors, suites, components and keys:
// Ubuntu keeps redis in universe, Debian in main). A machine with no such
// entry gets the distribution's default archive, Debian's or Ubuntu's, as
// os-release names it.
func sourceTwins(files []aptFile, osRelease map[string]string) (twins, error) {
	var t twins
	for _, f := range files {
		if strings.HasSuffix(f.name, ".sources") {
			for _, para := range paragraphs(f.text) {
				if twin, ok := deb822Twin(para); ok {
					t.deb822 += twin + "\n\n"
				}
			}
			continue
		}
		for _, line := range strings.Split(f.text, "\n") {
			fields := strings.Fields(line)
			if len(fields) < 3 || fields[0] != "deb" {
				continue
			}
			uri := fields[1]
			if strings.HasPrefix(uri, "[") { // options: [signed-by=... arch=...]
				for i, fl := range fields[1:] {
					if strings.HasSuffix(fl, "]") && i+2 < len(fields) {
						uri = fields[i+2]
						break
					}
				}
			}
			if distributionArchive(uri) {
				t.oneLine += "deb-src" + strings.TrimPrefix(strings.TrimSpace(line), "deb") + "\n"
			}
		}
	}
	if t.deb822 != "" || t.oneLine != "" {
		return t, nil
	}
	codename := osRelease["VERSION_CODENAME"]
	if codename == "" {
		return t, errors.New("no Debian or Ubuntu entry in the machine's apt sources, and /etc/os-release names no VERSION_CODENAME")
	}
	switch osRelease["ID"] {
	case "debian":
		t.deb822 = fmt.Sprintf("Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %[1]s %[1]s-updates\nComponents: main\n"+
			"Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"+
			"Types: deb-src\nURIs: http://deb.debian.org/debian-security\nSuites: %[1]s-security\nComponents: main\n"+
			"Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n", codename)
	case "ubuntu":
		t.deb822 = fmt.Sprintf("Types: deb-src\nURIs: http://archive.ubuntu.com/ubuntu\nSuites: %[1]s %[1]s-updates %[1]s-security\n"+
			"Components: main universe\nSigned-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg\n", codename)
	default:
		return t, fmt.Errorf("no Debian or Ubuntu entry in the machine's apt sources, and %q is neither", osRelease["ID"])
	}
	return t, nil
}

// paragraphs splits a deb822 file at its blank lines.
func paragraphs(text string) []string {
	var out []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.Join(cur, "\n"))
			cur = nil
		}
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			flush()
			continue
		}
		cur = append(cur, sc.Text())
	}
	flush()
	return out
}

// deb822Twin is para as a deb-src entry, when it is an enabled deb entry
// of the distribution's archive.
func deb822Twin(para string) (string, bool) {
	lines := strings.Split(para, "\n")
	types, uris := -1, ""
	for i, l := range lines {
		k, v, ok := strings.Cut(l, ":")
		if !ok || strings.HasPrefix(l, "#") || strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t") {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "types":
			if !slices.Contains(strings.Fields(v), "deb") {
				return "", false
			}
			types = i
		case "uris":
			uris = v
		case "enabled":
			if strings.EqualFold(strings.TrimSpace(v), "no") {
				return "", false
			}
		}
	}
	if types < 0 || !slices.ContainsFunc(strings.Fields(uris), distributionArchive) {
		return "", false
	}
	lines[types] = "Types: deb-src"
	return strings.Join(lines, "\n"), true
}

// distributionArchive says whether uri is Debian's or Ubuntu's own
// archive (or a mirror of it), which has the source packages; a third
// party's repository may have none, and apt-get update would fail on it.
// A mirror+file: URI (GitHub's Ubuntu runners list their mirrors so) is
// judged by the mirrors its file lists.
func distributionArchive(uri string) bool {
	if file, ok := strings.CutPrefix(uri, "mirror+file:"); ok {
		b, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 0 && distributionArchive(f[0]) {
				return true
			}
		}
		return false
	}
	u, err := url.Parse(strings.TrimPrefix(uri, "mirror+"))
	if err != nil || u.Host == "" {
		return false
	}
	switch path.Base(strings.TrimRight(u.Path, "/")) {
	case "debian", "debian-security", "ubuntu", "ubuntu-ports":
		return true
	}
	host := strings.ToLower(u.Hostname())
	return host == "deb.debian.org" || host == "snapshot.debian.org" || host == "security.debian.org" ||
		strings.HasSuffix(host, "archive.ubuntu.com") || host == "security.ubuntu.com" || host == "ports.ubuntu.com"
}
