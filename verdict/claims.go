package verdict

import (
	"fmt"
	"slices"
	"strings"

	"github.com/locktorture/locktorture/checker"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
)

// judgeClaims holds an exploration run to the lock's fault model: its
// promise (the validity deadline, or for a lock that gives none, that no
// two clients hold it at once) broken under claimed faults alone is a
// finding; broken when an unclaimed fault was drawn, it is explained.
// Anomalies with the promise kept (a client that outlived its lease, K1)
// are what the promise never covered, and said so.
func (j *Judgement) judgeClaims(info locks.Info, ops []history.Op) {
	// A lock that gives deadlines breaks its promise two ways the promise
	// checker tells apart: two holders promised the key at once, or its
	// holder's release refused while the key was still promised to it
	// (lease-lost). Either alone is the lock's own failure.
	promises := []string{"promise-broken", "lease-lost"}
	if v, ok := j.Verdict(checker.PromiseName); ok && v.Details.Promises == 0 {
		promises = []string{"double-holder"}
	}
	var broken []string
	for _, p := range promises {
		if slices.Contains(j.Observations, p) {
			broken = append(broken, p)
		}
	}
	promise := strings.Join(broken, " and ")
	var drawn, unclaimed []string
	for _, f := range fault.KindsIn(ops) {
		drawn = append(drawn, string(f))
		if !slices.Contains(info.Claims, f) {
			unclaimed = append(unclaimed, string(f))
		}
	}
	j.Matched = j.Outcome.Judged()
	switch {
	case !j.Matched || j.Outcome == Safe:
	case len(broken) == 0:
		j.Explained = fmt.Sprintf("%s with its promise kept under %s: clients outlived their leases, which no promise covers",
			j.Outcome, orNone(drawn))
	case len(unclaimed) == 0:
		j.Matched = false
		j.Finding = fmt.Sprintf("%s: %s broke its promise under %s, faults it claims to survive (its claims: %s)",
			promise, info.Name, orNone(drawn), info.ClaimList())
	default:
		j.Explained = fmt.Sprintf("%s, explained by %s, which %s makes no claim about", promise, strings.Join(unclaimed, ", "), info.Name)
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "no fault"
	}
	return strings.Join(s, ", ")
}
