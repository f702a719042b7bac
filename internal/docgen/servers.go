package docgen

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/locks"
)

// servers is generated/servers.md: every server kind package cluster can
// start (cluster.Kinds), what it runs and what its faults mean for it, and
// the registered locks that run on it.
func servers() (string, error) {
	onKind := map[string][]string{}
	for _, name := range locks.Names() {
		info, err := locks.Lookup(name)
		if err != nil {
			return "", err
		}
		onKind[info.ServerKind()] = append(onKind[info.ServerKind()], name)
	}
	var b strings.Builder
	b.WriteString("# The server kinds\n\n")
	fmt.Fprintf(&b, "The %d kinds of server a node can be (`cluster.Kinds`, each a `cluster.Kind`): what binary runs, "+
		"which persistence it can run with (its default first), and what the harness must know to fault it. "+
		"A lock names its kind in `locks.Info.Server` (none: `redis`). "+
		"How they are started and faulted: [backends and workers](../backends-and-workers.md), [lock services](../lock-services.md).\n\n", len(cluster.Kinds()))
	b.WriteString(headerRow("kind", "binary", "persistence", "speaks RESP", "ensemble", "start timeout", "recovery after a kill", "notes", "locks"))
	var installs strings.Builder
	for _, name := range cluster.Kinds() {
		k, err := cluster.LookupKind(name)
		if err != nil {
			return "", err
		}
		var persistence []string
		for _, p := range k.Persistence {
			persistence = append(persistence, string(p))
		}
		ensemble := ""
		switch {
		case k.Ensemble:
			ensemble = "yes, " + peerPorts(k.PeerPorts)
		case k.PeerPorts > 0:
			ensemble = "no; " + peerPorts(k.PeerPorts)
		}
		b.WriteString(row(code(k.Name), code(k.Binary), strings.Join(persistence, ", "), yes(k.RESP), ensemble,
			startTimeout(k), duration(k.Recovery), strings.Join(kindNotes(k), "; "), codes(onKind[k.Name])))
		fmt.Fprintf(&installs, "- `%s`: %s\n", k.Name, k.Install)
	}
	b.WriteString("\nWhen a binary is missing, a run stops with `cluster: <binary> not found: ` and what to do:\n\n")
	b.WriteString(installs.String())
	return b.String(), nil
}

// peerPorts says how many ports a member listens on for its peers.
func peerPorts(n int) string {
	if n == 1 {
		return "1 peer port"
	}
	return fmt.Sprintf("%d peer ports", n)
}

// startTimeout is how long a local start of k waits for it to answer.
func startTimeout(k *cluster.Kind) string {
	if k.StartTimeout == 0 {
		return "5s"
	}
	return k.StartTimeout.String()
}

// duration is d, or nothing when it is zero.
func duration(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// kindNotes are what else a kind says about how it is run and faulted.
func kindNotes(k *cluster.Kind) []string {
	var notes []string
	if k.User != "" {
		notes = append(notes, "runs as "+code(k.User)+" when the harness is root")
	}
	if k.ProcessGroup {
		notes = append(notes, "signals go to its whole process group")
	}
	if k.StopSignal != 0 && k.StopSignal != syscall.SIGTERM {
		notes = append(notes, "stopped gracefully with "+signalName(k.StopSignal))
	}
	if k.FaketimeBinary != nil {
		notes = append(notes, "a faked clock runs another build of its binary")
	}
	if k.Unsynced != nil {
		for _, p := range k.Persistence {
			if glob, lag := k.Unsynced(p); glob != "" {
				notes = append(notes, fmt.Sprintf("a power loss under %s cuts back %s by %s", p, code(glob), lag))
			}
		}
	}
	if k.ExpiryLag > 0 {
		notes = append(notes, fmt.Sprintf("looks for expired leases every %s, so a lease outlives its TTL by up to that and the work of ending it", k.ExpiryLag))
	}
	if k.Role != nil {
		notes = append(notes, "asked for its role in the ensemble (a story kills the leader)")
	}
	if k.Cleanup != nil {
		notes = append(notes, "leaves something outside its dir when killed, which the cluster removes")
	}
	switch {
	case k.Reset != nil && k.RESP:
		notes = append(notes, "as the store, kept with the lock servers it ran beside, emptied")
	case k.Reset != nil:
		notes = append(notes, "kept for a matrix's next pair of its topology when no fault touched it, emptied (`cluster.Pool`, `-fresh` to start each afresh)")
	}
	return notes
}

// signalName is a signal as a person writes it.
func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	}
	return s.String()
}
