package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// aofSampler remembers the size of the files a node fsyncs on a timer
// (Redis's incremental AOF files under appendfsync everysec) every 100 ms,
// so PowerLoss can cut them back to what the timer had surely put on disk.
type aofSampler struct {
	// glob names the files (Kind.Unsynced), found afresh at every sample:
	// a server may start new ones.
	glob string
	stop chan struct{}

	mu      sync.Mutex
	samples []aofSample
}

type aofSample struct {
	at    time.Time
	sizes map[string]int64
}

func startAOFSampler(glob string) *aofSampler {
	s := &aofSampler{glob: glob, stop: make(chan struct{})}
	s.sample()
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *aofSampler) files() []string {
	f, _ := filepath.Glob(s.glob)
	return f
}

func (s *aofSampler) sample() {
	sizes := map[string]int64{}
	for _, f := range s.files() {
		if st, err := os.Stat(f); err == nil {
			sizes[f] = st.Size()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, aofSample{at: time.Now(), sizes: sizes})
	// Keep a few seconds: PowerLoss looks back one.
	if len(s.samples) > 50 {
		s.samples = s.samples[len(s.samples)-50:]
	}
}

// truncateToSynced cuts every file back to its size at least `lag` ago (its size at the first sample, if the node is younger).
func (s *aofSampler) truncateToSynced(lag time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return nil
	}
	cut := s.samples[0]
	for _, smp := range s.samples {
		if time.Since(smp.at) >= lag {
			cut = smp
		}
	}
	for _, f := range s.files() {
		size := cut.sizes[f] // a file born since then loses everything
		if st, err := os.Stat(f); err == nil && st.Size() > size {
			if err := os.Truncate(f, size); err != nil {
				return fmt.Errorf("cluster: power loss: %w", err)
			}
		}
	}
	s.samples = nil
	return nil
}

func (s *aofSampler) close() { close(s.stop) }
