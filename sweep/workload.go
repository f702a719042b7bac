package sweep

import (
	"cmp"
	"fmt"
	"math"
	"time"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/workloads"
)

// The parameters of the clients' work that every story has, beside its
// own and TTLParam: a user's system has a critical section of some
// length, a think time, some keys and some clients, and asks where each
// starts to cost it.
const (
	HoldParam    = "hold"
	ThinkParam   = "think"
	KeysParam    = "keys"
	ClientsParam = "clients"
)

// WorkloadParams name the workload's parameters, in the order usage
// lists them.
var WorkloadParams = []string{HoldParam, ThinkParam, KeysParam, ClientsParam}

// workloadParam is the workload parameter name as story s (at the lease
// base, for a hold it tells in TTLs) has it by default.
func workloadParam(s scenario.Scenario, name string, base time.Duration) (scenario.Param, bool) {
	base = cmp.Or(base, s.TTL)
	switch name {
	case HoldParam:
		hold := s.Workload.Hold.MeanOf()
		if s.Workload.Hold.IsZero() {
			hold = time.Duration(s.HoldTTLs * float64(base))
		}
		return scenario.Param{Name: HoldParam, Unit: "ms", Default: ms(hold), Min: 0, Max: 60_000,
			Help: "the critical section's length; a swept hold is fixed at each point (not drawn), in place of the story's or -hold's"}, true
	case ThinkParam:
		think := cmp.Or(s.Workload.Think, workloads.DefaultThink)
		return scenario.Param{Name: ThinkParam, Unit: "ms", Default: ms(think.MeanOf()), Min: 0, Max: 60_000,
			Help: fmt.Sprintf("the time a client thinks between cycles; a swept think is fixed at each point (by default it is drawn, %s)", think)}, true
	case KeysParam:
		return scenario.Param{Name: KeysParam, Unit: "keys", Default: float64(max(s.Workload.Keys, 1)), Min: 1, Max: workloads.MaxKeys,
			Help: "how many lock keys the clients contend for, each guarding a register of its own (whole numbers)"}, true
	case ClientsParam:
		return scenario.Param{Name: ClientsParam, Unit: "clients", Default: float64(cmp.Or(s.ExactClients, s.Clients, 5)), Min: 2, Max: 256,
			Help: "how many clients contend for the lock (whole numbers)"}, true
	}
	return scenario.Param{}, false
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// workloadAt is run with the workload parameter name at v, the rest of
// run (the workload's other fields, the story's parameters, the
// interval) as it was; ok is false when name is not one.
func workloadAt(run engine.Options, name string, v float64) (engine.Options, bool) {
	d := workloads.FixedDist(time.Duration(math.Round(v * float64(time.Millisecond))))
	switch name {
	case HoldParam:
		run.Workload.Hold = d
	case ThinkParam:
		run.Workload.Think = d
	case KeysParam:
		run.Workload.Keys = int(v)
	case ClientsParam:
		run.Clients = int(v)
	default:
		return run, false
	}
	return run, true
}

// CheckAt says, in one line, why a sweep of story s's parameter name
// cannot be at v: keys and clients are counts, and a point between two
// would run at the lower one while the table said otherwise.
func CheckAt(s scenario.Scenario, name string, v float64) error {
	if _, own := s.Param(name); own {
		return nil
	}
	if (name == KeysParam || name == ClientsParam) && v != math.Trunc(v) {
		return fmt.Errorf("%s %g: a whole number (choose FROM, TO and STEPS so that every point is one)", name, v)
	}
	return nil
}
