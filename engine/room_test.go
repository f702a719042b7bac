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
func testRoom(t *testing.T) room { return testRoomOf(t, 2) }

// testRoomOf is a room of seats seats of the test's own.
func testRoomOf(t *testing.T, seats int) room {
	return room{name: fmt.Sprintf("locktorture-test-%d-%s", os.Getpid(), t.Name()), seats: seats}
}

// enters enters r with n seats, failing the test if it cannot within a
// second (free seats are taken at once).
func enters(t *testing.T, r room, n int) (leave func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*roomPoll)
	defer cancel()
	leave, err := r.enter(ctx, n, func(string, ...any) {})
	if err != nil {
		t.Fatalf("entering with %d seat(s): %v", n, err)
	}
	return leave
}

// waits checks that a run asking n seats of r is still waiting after a
// few polls, and gives up its wait; why says what it must not get.
func waits(t *testing.T, r room, n int, why string) {
	t.Helper()
	short, cancel := context.WithTimeout(context.Background(), 3*roomPoll)
	defer cancel()
	if leave, err := r.enter(short, n, func(string, ...any) {}); err == nil {
		leave()
		t.Fatal(why)
	}
}

func TestRoomGivesAnAloneStoryTheMachine(t *testing.T) {
	r := testRoom(t)
	ctx := context.Background()
	quiet := func(string, ...any) {}
	leaveFirst := enters(t, r, 1)
	// A second run gets the other seat; a third waits for one of theirs.
	leaveSecond := enters(t, r, 1)
	waits(t, r, 1, "a third run got a seat of two")
	leaveSecond()

	events := make(chan string, 3)
	aloneIn := make(chan func())
	go func() {
		leave, err := r.enter(ctx, r.seats, func(string, ...any) { events <- "alone waits" })
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
		leave, err := r.enter(ctx, 1, quiet)
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
	defer enters(t, r, r.seats)()
	waits(t, r, 1, "entered a room held alone")
}

// Runs take the seats they ask for: in a room of four, a run of a core
// (two seats) and two light ones (one each) fill it, and a light run more
// waits until one of them leaves; a run of a core waits for two free
// seats, however many light runs come and go.
func TestRoomSeatsRunsByWeight(t *testing.T) {
	r := testRoomOf(t, 4)
	core := enters(t, r, 2)
	light1 := enters(t, r, 1)
	light2 := enters(t, r, 1)
	waits(t, r, 1, "a fifth seat was taken of four")
	light1()
	waits(t, r, 2, "a run of two seats got in with one free")
	light2()
	enters(t, r, 2)()
	core()
}
