package docker

import (
	"context"
	"testing"
	"time"

	"github.com/locktorture/locktorture/cluster"
)

func TestTiming(t *testing.T) {
	b, err := New(cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, err := b.Start(context.Background(), cluster.ServerSpec{Name: "n1", Persistence: cluster.AOFAlways})
	if err != nil {
		t.Fatal(err)
	}
	c := s.(*container)
	for i := 0; i < 3; i++ {
		st := time.Now()
		_, _ = c.agent.do("sh true")
		t.Logf("exec true %v", time.Since(st))
	}
	st := time.Now()
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kill %v", time.Since(st))
	st = time.Now()
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("start %v", time.Since(st))
	st = time.Now()
	c.Pause()
	t.Logf("pause %v", time.Since(st))
	st = time.Now()
	c.Resume()
	t.Logf("resume %v", time.Since(st))
}
