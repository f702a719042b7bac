package checkthenset_test

import (
	"testing"

	"github.com/locktorture/locktorture/examples/checkthenset"
	"github.com/locktorture/locktorture/locktest"
)

// The harness finds the check-then-set race without any fault at all, and
// of course the paused holder too.
func TestCheckThenSetUnderTheStories(t *testing.T) {
	locktest.Expect(t, locktest.Lock{Name: "check-then-set", New: checkthenset.New}, map[string]string{
		"baseline":      "unsafe",
		"paused-holder": "unsafe",
	})
}
