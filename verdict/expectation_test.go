package verdict

import (
	"slices"
	"testing"
)

func TestParseExpectationReadsTheMatrixWords(t *testing.T) {
	for _, tc := range []struct {
		in         string
		want       Outcome
		show, hide []string
	}{
		{in: "safe", want: Safe},
		{in: "unsafe +promise-broken", want: Unsafe, show: []string{"promise-broken"}},
		{in: "unsafe -foreign-release", want: Unsafe, hide: []string{"foreign-release"}},
		{in: "lock-unsafe +stale-write-rejected −promise-broken", want: LockUnsafe,
			show: []string{StaleWriteRejected}, hide: []string{"promise-broken"}},
	} {
		e, err := ParseExpectation(tc.in)
		if err != nil || e.Outcome != tc.want || !slices.Equal(e.Show, tc.show) || !slices.Equal(e.Hide, tc.hide) {
			t.Errorf("%q: %+v, %v", tc.in, e, err)
		}
		// What the matrix prints reads back as the same expectation.
		if back, err := ParseExpectation(e.String()); err != nil || back.String() != e.String() {
			t.Errorf("%q printed as %q reads back as %+v, %v", tc.in, e.String(), back, err)
		}
	}
	for _, bad := range []string{"", "sfe", "unsafe promise-broken", "unsafe +promise-brokn", "unsafe -all"} {
		if _, err := ParseExpectation(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}
