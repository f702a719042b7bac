package locks

import (
	"strings"

	"github.com/locktorture/locktorture/fault"
)

// Claims that several locks share.
var (
	// LeaseClaims are a lease's, held in one Redis: whatever keeps the key in
	// Redis until its PX ran out keeps the promise; a client that
	// stops or dies does not break it (its lease simply lapses), nor does
	// its clock (the deadline is measured from the client's own start).
	LeaseClaims = []fault.Kind{fault.Partition, fault.Latency, fault.NodePause, fault.ClientPause, fault.ClientCrash, fault.ClientClock}
	// WatchdogClaims are a watchdog lock's: no deadline is promised, only that the key stays the
	// holder's while its watchdog renews it, which needs the holder's
	// process running and reaching Redis.
	WatchdogClaims = []fault.Kind{fault.Latency, fault.ClientCrash, fault.ClientClock}
)

// ClaimList names the kinds of fault i claims to survive, comma-separated, or
// "none".
func (i Info) ClaimList() string {
	if len(i.Claims) == 0 {
		return "none"
	}
	names := make([]string, len(i.Claims))
	for k, f := range i.Claims {
		names[k] = string(f)
	}
	return strings.Join(names, ", ")
}

// without is claims less the faults named.
func without(claims []fault.Kind, drop ...fault.Kind) []fault.Kind {
	var out []fault.Kind
	for _, c := range claims {
		keep := true
		for _, d := range drop {
			keep = keep && c != d
		}
		if keep {
			out = append(out, c)
		}
	}
	return out
}
