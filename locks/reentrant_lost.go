package locks

func registerReentrantLost(register func(Info)) {
	register(Info{
		Name:      "reentrant-lost",
		Traits:    Traits{Ends: Renewed, Release: OwnerChecked, Clock: ServerWall, OtherKeys: true, Notified: true, TellsLoss: true},
		Claims:    WatchdogClaims,
		Reentrant: true,
		Summary: "reentrant whose watchdog tells the holder when a renewal fails (Lease.Lost), as redisson#3636 and #4698 ask; " +
			"the workload checks it before writing",
		New: func(c Config) Lock {
			l := newReentrant(c, c.Clients[0])
			l.tellsLoss = true
			return l
		},
	})
}
