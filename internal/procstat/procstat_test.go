package procstat

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// A running process reads as running or sleeping, a killed child its
// parent has not reaped as a zombie, and a reaped one as gone.
func TestStateFollowsAChildToItsEnd(t *testing.T) {
	if s := State(os.Getpid()); s != "R" && s != "S" {
		t.Fatalf("this process's state: %q, want R or S", s)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Kill()
	s := ""
	for deadline := time.Now().Add(5 * time.Second); s != "Z" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		s = State(pid)
	}
	if s != "Z" {
		t.Fatalf("a killed, unreaped child's state: %q, want Z", s)
	}
	_ = cmd.Wait()
	if s := State(pid); s != "" {
		t.Fatalf("a reaped child's state: %q, want gone", s)
	}
}
