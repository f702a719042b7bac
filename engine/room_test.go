package engine

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// An Alone story waits for the runs already in the room, and a run that
// arrives while it waits queues behind it: without the turnstile, runs
// starting one after another would keep the room shared forever.
// testRoom is a two-seat room of the test's own, apart from the machine's.
func testRoom(t *testing.T) room {
	return room{name: fmt.Sprintf("locktorture-test-%d-%s", os.Getpid(), t.Name()), seats: 2}
}

func TestRoomGivesAnAloneStoryTheMachine(t *testing.T) {
	r := testRoom(t)
	ctx := context.Background()
	quiet := func(string, ...any) {}
	leaveFirst, err := r.enter(ctx, false, quiet)
	if err != nil {
		t.Fatal(err)
	}
	// A second run gets the other seat; a third waits for one of theirs.
	leaveSecond, err := r.enter(ctx, false, quiet)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 3*roomPoll)
	if _, err := r.enter(short, false, quiet); err == nil {
		t.Fatal("a third run got a seat of two")
	}
	cancel()
	leaveSecond()

	events := make(chan string, 3)
	aloneIn := make(chan func())
	go func() {
		leave, err := r.enter(ctx, true, func(string, ...any) { events <- "alone waits" })
		if err != nil {
			t.Error(err)
		}
		events <- "alone in"
		aloneIn <- leave
	}()
	if e := <-events; e != "alone waits" {
		t.Fatalf("first event %q, want the alone run waiting", e)
	}
	// The waiting alone run holds the turnstile: nobody arriving now can
	// even try for the seat the first run will give up.
	if l, ok, err := r.take("turnstile"); ok || err != nil {
		if ok {
			l.Close()
		}
		t.Fatalf("the turnstile was free while an alone run waited (%v)", err)
	}
	lateIn := make(chan func())
	go func() {
		leave, err := r.enter(ctx, false, quiet)
		if err != nil {
			t.Error(err)
		}
		events <- "late shared in"
		lateIn <- leave
	}()
	nothingFor := func(while string) {
		time.Sleep(5 * roomPoll)
		select {
		case e := <-events:
			t.Fatalf("%q while %s", e, while)
		default:
		}
	}
	nothingFor("the first run still holds the room")
	leaveFirst()
	if e := <-events; e != "alone in" {
		t.Fatalf("got %q once the first run left, want the alone run in before the late one", e)
	}
	leaveAlone := <-aloneIn
	nothingFor("the alone run holds the room")
	leaveAlone()
	if e := <-events; e != "late shared in" {
		t.Fatalf("got %q, want the late run in once the alone run left", e)
	}
	(<-lateIn)()
}

// A run waiting for the room stops waiting when its context ends.
func TestRoomWaitEndsWithTheContext(t *testing.T) {
	r := testRoom(t)
	leave, err := r.enter(context.Background(), true, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	defer leave()
	ctx, cancel := context.WithTimeout(context.Background(), 3*roomPoll)
	defer cancel()
	if _, err := r.enter(ctx, false, func(string, ...any) {}); err == nil {
		t.Fatal("entered a room held alone")
	}
}
