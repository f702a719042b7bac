package locks

func registerReentrantAsync(register func(Info)) {
	register(Info{
		Name:      "reentrant-async",
		Traits:    Traits{Ends: Renewed, Release: OwnerChecked, Clock: ServerWall, OtherKeys: true, Notified: true, Detached: true},
		Claims:    WatchdogClaims,
		Reentrant: true,
		Broken:    true,
		Summary: "broken on purpose: reentrant whose acquire runs apart from its caller and starts the watchdog when Redis answers, " +
			"as Redisson's tryAcquireAsync does in a callback on the acquire's future; a caller that gives up as the lock is taken " +
			"leaves the watchdog renewing a key nobody holds (redisson#2714, #4368, #7272)",
		New: func(c Config) Lock {
			l := newReentrant(c, c.Clients[0])
			l.detached = true
			return l
		},
	})
}
