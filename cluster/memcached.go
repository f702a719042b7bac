package cluster

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// MemcachedKind is a memcached node: TCP only, on loopback, keeping
// nothing on disk, so a restarted node is empty. Ready reads the pid from
// its "stats", which holds a start to the same rule as Redis's: our own
// process answers.
//
// Its pairs, the library's (PHP and Python workers) and the Go lock's,
// take one seat: measured four at a time beside two busy loops, none
// ran late (docs/ci-and-benchmarks.md). So Alone is unset and
// LightWorkers set.
var MemcachedKind = &Kind{
	Name:        "memcached",
	Binary:      "memcached",
	Install:     "install it (apt-get install memcached) or name its path in Options.Binaries",
	Persistence: []Persistence{NoPersistence},
	Args: func(spec ServerSpec, at Place) ([]string, error) {
		a := []string{"-p", strconv.Itoa(at.Port), "-l", at.Bind, "-U", "0"}
		if os.Geteuid() == 0 {
			// memcached refuses to run as root without being told to.
			a = append(a, "-u", "root")
		}
		return append(a, spec.Args...), nil
	},
	Ready:        memcachedReady,
	LightWorkers: "one memcached answering in microseconds: its pairs, four at a time beside two busy loops, kept their lateness under half its limits",
}

// memcachedReady asks memcached on addr for its stats and returns the pid
// they name.
func memcachedReady(ctx context.Context, addr string) (int, error) {
	d := net.Dialer{Timeout: 200 * time.Millisecond}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c.Write([]byte("stats\r\n")); err != nil {
		return 0, err
	}
	pid := 0
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "END" {
			if pid == 0 {
				return 0, fmt.Errorf("stats without a pid")
			}
			return pid, nil
		}
		if v, ok := strings.CutPrefix(line, "STAT pid "); ok {
			if pid, err = strconv.Atoi(v); err != nil {
				return 0, fmt.Errorf("stats named pid %q", v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("stats ended before END")
}
