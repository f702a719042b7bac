package verdict

import (
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/checker"
)

// The figures are read from the register's and the intervals' verdicts
// over the time the clients worked.
func TestFiguresOf(t *testing.T) {
	vs := []checker.Verdict{
		{Checker: checker.ResourceName, Details: checker.Details{WritesAccepted: 200, LostUpdates: 30}},
		{Checker: checker.IntervalsName, Details: checker.Details{DoubleHeld: 2 * time.Second, Episodes: 4}},
	}
	f := figuresOf(vs, int64(time.Second), int64(11*time.Second))
	if f.WritesAcked != 200 || f.WritesLost != 30 || f.LostFraction != 0.15 || f.Span != 10*time.Second ||
		f.DoubleHeldFraction != 0.2 || f.Episodes != 4 {
		t.Fatalf("%+v", f)
	}
	if s := f.String(); !strings.Contains(s, "30 of 200 acknowledged writes lost (15.00%)") || !strings.Contains(s, "(20.00%) in 4 episode(s)") {
		t.Fatalf("%s", s)
	}
	if z := figuresOf(nil, 5, 5); z.LostFraction != 0 || z.DoubleHeldFraction != 0 {
		t.Fatalf("no writes and no time should give zeros, not NaN: %+v", z)
	}
}
